// Package backup takes online backups of a cardbox store and restores
// them.
//
// A store is its Postgres database and the append-only files of its data
// directory (blob pack, turn log), each a stream of segment files. A
// backup reads the committed ends of the streams and their sealed
// segments in one REPEATABLE READ transaction, exports that
// transaction's snapshot to pg_dump, and copies the segment files up to
// those ends: the dump and the files are one moment of the store,
// whatever the server appends meanwhile (bytes past a committed end
// belong to no row of the snapshot). The files are copied in pieces
// (the manifest's segments) named after their hash, so a later backup
// into the same directory copies only the pieces that changed; a sealed
// segment is checked against its BLAKE3 once, when first backed up, and
// taken over by later backups by its name and hash. A manifest naming
// every piece and its BLAKE3 is written last. Restore checks every hash
// before it writes anything.
package backup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/pgembed"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/syncfile"
)

// The backup directory's layout: the manifest, the segments of the data
// directory's files in dataDir, the database's dumps in dbDir.
const (
	dataDir   = "data"
	dbDir     = "db"
	lockFile  = "backup.lock"
	tmpSuffix = ".tmp"
)

// DefaultSegmentSize is how many bytes of a file one segment holds: a
// later backup copies again only the segments that grew.
const DefaultSegmentSize = 16 << 20

// DefaultRate is how many bytes a second a backup writes by default, of
// the data directory's files and of the database's dump: slow enough that appends keep at least
// three quarters of their throughput on a small machine (see
// docs/performance.md), fast enough to copy 10 GB in under 3 minutes.
const DefaultRate = 64 << 20

// embeddedDB is the database cardbox uses inside its embedded cluster.
const embeddedDB = "cardbox"

// Options say what to back up and where.
type Options struct {
	// DataDir is the store's data directory.
	DataDir string
	// Dest is the backup directory: new, empty, or holding an earlier
	// backup of the same store.
	Dest string
	// DatabaseURL is the store's database; empty: the embedded cluster
	// in DataDir.
	DatabaseURL string
	// PGBinDir is where the PostgreSQL programs are; empty: searched.
	PGBinDir string
	// Rate limits the backup's writes in bytes a second, the files'
	// copy and the database's dump together; 0: DefaultRate, negative:
	// no limit.
	Rate int64
	// SegmentSize is the size of the files' segments; 0:
	// DefaultSegmentSize.
	SegmentSize int64
	// Progress, if set, hears how far the backup is, often.
	Progress func(Status)

	// limit, if set, paces the backup instead of a limiter of Rate: a
	// test's, on a clock of its own.
	limit limiter
}

// Status is how far a backup or a restore is.
type Status struct {
	Phase       string
	Done, Total int64 // bytes
}

// Backup takes a consistent backup of the store at opts.DataDir into
// opts.Dest, beside a running server or of a stopped one, and returns
// its manifest.
func Backup(ctx context.Context, opts Options) (*Manifest, error) {
	start := time.Now()
	dir, dest, err := backupPaths(opts.DataDir, opts.Dest)
	if err != nil {
		return nil, err
	}
	id, err := store.ReadStoreID(dir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if id == uuid.Nil {
		return nil, fmt.Errorf("data directory %s holds no cardbox store (no STORE_ID)", dir)
	}
	// Before anything starts: without a URL, a store that lives in an
	// external database must not get an embedded cluster made for it.
	target := datadir.Database{Embedded: true}
	if opts.DatabaseURL != "" {
		if target, err = external(opts.DatabaseURL); err != nil {
			return nil, err
		}
	}
	if _, err := datadir.CheckDatabase(dir, id.String(), target); err != nil {
		return nil, err
	}
	release, err := useDataDir(dir)
	if err != nil {
		return nil, err
	}
	defer release()
	unlock, prev, err := openDest(dest, id.String())
	if err != nil {
		return nil, err
	}
	defer unlock()
	url, stop, err := openDatabase(ctx, dir, opts.DatabaseURL, opts.PGBinDir)
	if err != nil {
		return nil, err
	}
	defer stop()
	snap, err := openSnapshot(ctx, url)
	if err != nil {
		return nil, err
	}
	defer snap.close()
	if snap.storeID != id.String() {
		return nil, fmt.Errorf("data directory %s holds store %s, but the database holds store %s: give the server's --database-url", dir, id, snap.storeID)
	}
	m, err := take(ctx, opts, dir, dest, url, snap, prev)
	if err != nil {
		return nil, err
	}
	m.Took = time.Since(start).Round(time.Millisecond).String()
	for _, d := range []string{dataDir, dbDir} {
		if err := syncfile.Dir(filepath.Join(dest, d)); err != nil {
			return nil, fmt.Errorf("backup directory: %w", err)
		}
	}
	if err := writeManifest(dest, m); err != nil {
		return nil, err
	}
	prune(dest, m)
	return m, nil
}

// take dumps the database in the snapshot and copies the files up to its
// committed ends, side by side, and returns the new backup's manifest.
func take(ctx context.Context, opts Options, dir, dest, url string, snap *snapshot, prev *Manifest) (*Manifest, error) {
	m := &Manifest{
		Format: FormatVersion, StoreID: snap.storeID, Created: time.Now().UTC(), Committed: snap.ends, Turns: snap.turns,
		Versions: Versions{Cardbox: cardboxVersion(), Migration: snap.migration, Postgres: snap.server},
		Database: Database{Embedded: opts.DatabaseURL == "", Owner: snap.owner},
	}
	segSize := opts.SegmentSize
	if segSize <= 0 {
		segSize = DefaultSegmentSize
	}
	// One limiter for the files and the dump: the throttle bounds what
	// the backup writes in all, and so what it reads of the store's disk
	// and of its Postgres.
	limit := opts.limit
	if limit == nil {
		limit = newLimiter(rateOf(opts.Rate))
	}
	c := newCopier(dest, limit, segSize)
	total := snap.ends.Pack + snap.ends.TurnLog
	report := func(phase string) {
		if opts.Progress != nil {
			opts.Progress(Status{Phase: phase, Done: c.copied.Load(), Total: total})
		}
	}
	var sources []source
	for _, st := range streams(dir) {
		got, err := st.sources(st.committedEnd(snap.ends), snap.sealed)
		if err != nil {
			return nil, err
		}
		sources = append(sources, got...)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		m.Database.Dump, m.Versions.PGDump, err = dumpDatabase(gctx, limit, opts.PGBinDir, url, snap.id, dest)
		return err
	})
	if m.Database.Embedded {
		g.Go(func() error {
			roles, err := dumpRoles(gctx, limit, opts.PGBinDir, url, dest)
			m.Database.Roles = &roles
			return err
		})
	}
	g.Go(func() error {
		stopReport := every(gctx, 200*time.Millisecond, func() { report("copying files") })
		defer stopReport()
		for _, src := range sources {
			var before *File
			if prev != nil {
				before = prev.File(src.rel)
			}
			got, err := c.copyFile(gctx, src, before)
			if err != nil {
				return err
			}
			m.Files = append(m.Files, got)
		}
		report("dumping the database")
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	m.Copied = c.copied.Load()
	return m, nil
}

// every calls fn every interval until stop is called or ctx ends.
func every(ctx context.Context, interval time.Duration, fn func()) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return func() { cancel(); <-done }
}

func rateOf(r int64) int64 {
	switch {
	case r == 0:
		return DefaultRate
	case r < 0:
		return 0
	}
	return r
}

// backupPaths makes both paths absolute (symbolic links resolved as far
// as they exist) and refuses a backup directory inside the data
// directory: a backup there would be lost with it and copied into itself.
func backupPaths(dataDir, dest string) (string, string, error) {
	dir, err := resolve(dataDir)
	if err != nil {
		return "", "", fmt.Errorf("data directory: %w", err)
	}
	if _, err := os.Stat(dir); err != nil {
		return "", "", fmt.Errorf("data directory: %w", err)
	}
	d, err := resolve(dest)
	if err != nil {
		return "", "", fmt.Errorf("backup directory: %w", err)
	}
	if within(d, dir) {
		return "", "", fmt.Errorf("backup directory %s is inside the data directory %s: keep backups on another disk, or at least outside it", d, dir)
	}
	return dir, d, nil
}

// resolve returns path absolute, with the symbolic links of its longest
// existing prefix resolved.
func resolve(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	var rest []string
	for p := abs; ; p = filepath.Dir(p) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if p == filepath.Dir(p) {
			return abs, nil
		}
		rest = append([]string{filepath.Base(p)}, rest...)
	}
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// useDataDir takes the data directory's lock for the backup of a stopped
// store, or goes on beside the cardboxd that holds it; any other holder
// (recover, migrate, a restore) may be rewriting the files, so it
// refuses.
func useDataDir(dir string) (release func(), err error) {
	lock, err := datadir.Acquire(dir, "cardbox backup")
	if err == nil {
		return func() { lock.Unlock() }, nil
	}
	if !errors.Is(err, datadir.ErrLocked) {
		return nil, err
	}
	if owner := datadir.Owner(dir); strings.Contains(owner, ": cardboxd") {
		return func() {}, nil
	}
	return nil, fmt.Errorf("%w (a backup runs beside cardboxd, or on a stopped store)", err)
}

// openDest prepares the backup directory: it takes its lock, removes
// what a backup cut short left, and returns the previous backup, if
// any, to copy incrementally from. A directory that holds something else,
// or another store's backup, is refused.
func openDest(dest, storeID string) (unlock func(), prev *Manifest, err error) {
	if err := checkDestEntries(dest); err != nil {
		return nil, nil, err
	}
	for _, d := range []string{dest, filepath.Join(dest, dataDir), filepath.Join(dest, dbDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, fmt.Errorf("backup directory: %w", err)
		}
	}
	unlock, err = flockFile(filepath.Join(dest, lockFile))
	if err != nil {
		return nil, nil, fmt.Errorf("backup directory %s: %w", dest, err)
	}
	prev, err = ReadManifest(dest)
	switch {
	case errors.Is(err, ErrNotBackup):
		prev, err = nil, nil
	case err == nil && prev.StoreID != storeID:
		err = fmt.Errorf("backup directory %s holds a backup of store %s, not of this data directory's store %s: choose another directory", dest, prev.StoreID, storeID)
	}
	if err != nil {
		unlock()
		return nil, nil, err
	}
	removeTemporary(dest)
	return unlock, prev, nil
}

// checkDestEntries refuses a backup directory that holds anything but a
// backup: its files would be mixed with the backup's, or pruned.
func checkDestEntries(dest string) error {
	entries, err := os.ReadDir(dest)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backup directory: %w", err)
	}
	for _, e := range entries {
		switch n := e.Name(); {
		case n == dataDir, n == dbDir, n == lockFile, strings.HasPrefix(n, ManifestFile):
		default:
			return fmt.Errorf("backup directory %s holds other files (%s): give an empty or new directory, or one that holds a backup", dest, n)
		}
	}
	return nil
}

func flockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.New("another backup is writing to it")
		}
		return nil, err
	}
	return func() { f.Close() }, nil
}

// removeTemporary removes the temporary files of a backup cut short.
func removeTemporary(dest string) {
	for _, d := range []string{dest, filepath.Join(dest, dataDir), filepath.Join(dest, dbDir)} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), tmpSuffix) {
				os.Remove(filepath.Join(d, e.Name()))
			}
		}
	}
}

// prune removes the files of the backup directory that m does not name:
// the previous backup's, and those of backups cut short. What it fails
// to remove the next backup removes.
func prune(dest string, m *Manifest) {
	keep := map[string]bool{}
	for _, b := range m.blobs() {
		keep[b.Name] = true
	}
	for _, d := range []string{dataDir, dbDir} {
		entries, _ := os.ReadDir(filepath.Join(dest, d))
		for _, e := range entries {
			if name := filepath.Join(d, e.Name()); !keep[name] {
				os.Remove(filepath.Join(dest, name))
			}
		}
	}
}

// openDatabase returns the URL of the store's database and what to call
// when done: with no URL it uses the embedded cluster of dir, as the
// server runs it, or started for the backup (and stopped after it).
func openDatabase(ctx context.Context, dir, url, binDir string) (string, func(), error) {
	if url != "" {
		return url, func() {}, nil
	}
	srv, err := pgembed.Start(ctx, pgembed.Options{Dir: filepath.Join(dir, "postgres"), BinDir: binDir, Join: true})
	if err != nil {
		return "", nil, err
	}
	stop := func() {
		if srv.Started() {
			_ = srv.Stop(context.Background())
		}
	}
	return srv.URL(embeddedDB), stop, nil
}

// cardboxVersion is the main module's version as built.
func cardboxVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += " " + s.Value
		}
	}
	return v
}
