package backup

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/pgembed"
	"github.com/cardboxhq/cardbox/migrations"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/syncfile"
)

// RestoreOptions say which backup to restore and where.
type RestoreOptions struct {
	// Src is the backup directory.
	Src string
	// DataDir is the new data directory: absent or empty.
	DataDir string
	// DatabaseURL is an existing, empty database to restore into; empty:
	// a new embedded cluster in DataDir (the backup must be of an
	// embedded store, whose roles it holds).
	DatabaseURL string
	// PGBinDir is where the PostgreSQL programs are; empty: searched.
	PGBinDir string
	// Progress, if set, hears how far the restore is, often.
	Progress func(Status)
}

// ErrDamaged is a backup whose files are missing, short or do not hash
// to what its manifest says.
var ErrDamaged = errors.New("backup damaged or incomplete")

// Restore builds a new data directory (and its database) from the backup
// at opts.Src, after checking every file of the backup against its
// manifest; a damaged or incomplete backup is refused before anything is
// written. It returns the backup's manifest.
func Restore(ctx context.Context, opts RestoreOptions) (*Manifest, error) {
	src, err := resolve(opts.Src)
	if err != nil {
		return nil, fmt.Errorf("backup directory: %w", err)
	}
	m, err := ReadManifest(src)
	if err != nil {
		return nil, err
	}
	if opts.DatabaseURL == "" && !m.Database.Embedded {
		return nil, fmt.Errorf("backup %s is of a store in an external database: give --database-url of an empty database to restore it into", src)
	}
	dir, err := resolve(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if within(dir, src) || within(src, dir) {
		return nil, fmt.Errorf("data directory %s and backup %s overlap: restore into a new directory elsewhere", dir, src)
	}
	if err := checkNewDataDir(dir); err != nil {
		return nil, err
	}
	if opts.DatabaseURL != "" {
		if err := checkEmptyDatabase(ctx, opts.DatabaseURL); err != nil {
			return nil, err
		}
	}
	if err := Check(ctx, src, m, opts.Progress); err != nil {
		return nil, err
	}
	lock, err := datadir.Acquire(dir, "cardbox restore")
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	if err := restoreFiles(ctx, src, dir, m, opts.Progress); err != nil {
		return nil, err
	}
	report(opts.Progress, "loading the database", 0, 0)
	where, err := restoreDatabase(ctx, src, dir, m, opts)
	if err != nil {
		return nil, err
	}
	return m, finishDataDir(dir, m, where)
}

func report(p func(Status), phase string, done, total int64) {
	if p != nil {
		p(Status{Phase: phase, Done: done, Total: total})
	}
}

// checkNewDataDir refuses a data directory that holds anything: a store
// there would be overwritten, and a half-used one mixed with the backup.
func checkNewDataDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if id, err := store.ReadStoreID(dir); err == nil && id != uuid.Nil {
		return fmt.Errorf("data directory %s already holds store %s: restore into a new directory", dir, id)
	}
	if len(entries) > 0 {
		return fmt.Errorf("data directory %s is not empty (it holds %s): restore into a new or empty directory", dir, entries[0].Name())
	}
	return nil
}

// Check verifies that src holds every file m names, whole, with the hash
// m says, and that the segments cover each file up to its committed end.
// Its error names every problem it found.
func Check(ctx context.Context, src string, m *Manifest, progress func(Status)) error {
	problems := checkStreams(m.Files, m.Committed)
	var total, done int64
	for _, b := range m.blobs() {
		total += b.Size
	}
	for _, b := range m.blobs() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p := checkBlob(src, b); p != "" {
			problems = append(problems, p)
		}
		done += b.Size
		report(progress, "checking the backup", done, total)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s: %s", ErrDamaged, src, strings.Join(problems, "; "))
	}
	return nil
}

// checkBlob returns what is wrong with b in src, or "".
func checkBlob(src string, b Blob) string {
	size, sum, err := hashFile(filepath.Join(src, b.Name))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return b.Name + " is missing"
	case err != nil:
		return fmt.Sprintf("%s: %v", b.Name, err)
	case size != b.Size:
		return fmt.Sprintf("%s holds %d bytes, the manifest says %d", b.Name, size, b.Size)
	case sum != b.BLAKE3:
		return fmt.Sprintf("%s has BLAKE3 %s, the manifest says %s", b.Name, sum, b.BLAKE3)
	}
	return ""
}

// restoreFiles writes the data directory's files from their segments,
// hashing each again as it is copied (the backup must not change between
// the check and the copy), and fsyncs them.
func restoreFiles(ctx context.Context, src, dir string, m *Manifest, progress func(Status)) error {
	var total, done int64
	for _, f := range m.Files {
		total += f.Size
	}
	for _, f := range m.Files {
		if _, _, ok := parsePath(f.Path); !ok {
			return fmt.Errorf("%w: %s is no segment file of a cardbox data directory", ErrDamaged, f.Path)
		}
		path := fromData(dir, f.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("restore %s: %w", f.Path, err)
		}
		for _, s := range f.Segments {
			if err := ctx.Err(); err != nil {
				out.Close()
				return err
			}
			if err := appendSegment(out, src, s); err != nil {
				out.Close()
				return fmt.Errorf("restore %s: %w", f.Path, err)
			}
			done += s.Size
			report(progress, "restoring files", done, total)
		}
		if err := out.Sync(); err != nil {
			out.Close()
			return fmt.Errorf("restore %s: %w", f.Path, err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("restore %s: %w", f.Path, err)
		}
		if err := syncfile.Dir(filepath.Dir(path)); err != nil {
			return err
		}
	}
	return nil
}

func appendSegment(out *os.File, src string, s Segment) error {
	in, err := os.Open(filepath.Join(src, s.Name))
	if err != nil {
		return err
	}
	defer in.Close()
	h := blake3.New()
	n, err := io.Copy(io.MultiWriter(out, h), in)
	if err != nil {
		return err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); n != s.Size || sum != s.BLAKE3 {
		return fmt.Errorf("%w: %s changed while it was restored", ErrDamaged, s.Name)
	}
	return nil
}

// restoreDatabase loads the dump into a new embedded cluster in dir, or
// into the empty database at opts.DatabaseURL, and returns where it is.
func restoreDatabase(ctx context.Context, src, dir string, m *Manifest, opts RestoreOptions) (datadir.Database, error) {
	if opts.DatabaseURL != "" {
		where, err := external(opts.DatabaseURL)
		if err != nil {
			return where, err
		}
		return where, loadExternal(ctx, opts.PGBinDir, opts.DatabaseURL, filepath.Join(src, m.Database.Dump.Name))
	}
	srv, err := pgembed.Start(ctx, pgembed.Options{Dir: filepath.Join(dir, "postgres"), BinDir: opts.PGBinDir})
	if err != nil {
		return datadir.Database{}, err
	}
	defer func() { _ = srv.Stop(context.Background()) }() // a cluster made for the restore; its files stay
	if err := srv.EnsureDatabase(ctx, embeddedDB); err != nil {
		return datadir.Database{}, err
	}
	if m.Database.Roles != nil {
		if err := loadRoles(ctx, opts.PGBinDir, srv.URL("postgres"), filepath.Join(src, m.Database.Roles.Name)); err != nil {
			return datadir.Database{}, err
		}
	}
	if err := loadDump(ctx, opts.PGBinDir, srv.URL(embeddedDB), filepath.Join(src, m.Database.Dump.Name)); err != nil {
		return datadir.Database{}, err
	}
	return datadir.Database{Embedded: true}, srv.Stop(ctx)
}

// external names the database at url as the data directory records it.
func external(url string) (datadir.Database, error) {
	pc, err := pgconn.ParseConfig(url)
	if err != nil {
		return datadir.Database{}, fmt.Errorf("--database-url: %w", err)
	}
	return datadir.Database{Host: pc.Host, Port: pc.Port, Name: pc.Database}, nil
}

// checkEmptyDatabase refuses a database that holds a store or any other
// table, and one the URL's role does not own: cardbox's tables belong to
// the role it logs in as, and restore makes them as that role.
func checkEmptyDatabase(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.Background())
	var db, owner, user string
	var super bool
	err = conn.QueryRow(ctx, `SELECT current_database(), pg_get_userbyid(d.datdba), current_user, r.rolsuper
		FROM pg_database d, pg_roles r WHERE d.datname = current_database() AND r.rolname = current_user`).Scan(&db, &owner, &user, &super)
	if err != nil {
		return fmt.Errorf("look at the database: %w", err)
	}
	var storeID string
	err = conn.QueryRow(ctx, `SELECT store_id::text FROM turn_stores LIMIT 1`).Scan(&storeID)
	if err == nil {
		return fmt.Errorf("the database %s at --database-url already holds cardbox store %s: restore into a new, empty database", db, storeID)
	}
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'`).Scan(&n)
	if err != nil {
		return fmt.Errorf("look at the database: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("the database %s at --database-url holds %d tables: restore into a new, empty database", db, n)
	}
	if owner != user && !super {
		return fmt.Errorf("the database %s at --database-url is owned by %s, not by %s, the role the URL logs in as: "+
			"cardbox's tables belong to the role it logs in as (ALTER DATABASE %s OWNER TO %s)", db, owner, user,
			pgx.Identifier{db}.Sanitize(), pgx.Identifier{user}.Sanitize())
	}
	return nil
}

// loadRoles creates the backup's roles in a new cluster; the one initdb
// made (the superuser cardbox connects as) exists already.
func loadRoles(ctx context.Context, binDir, url, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("restore the roles: %w", err)
	}
	var keep []string
	for _, line := range strings.Split(string(b), "\n") {
		if line != "CREATE ROLE "+pgembed.Superuser+";" {
			keep = append(keep, line)
		}
	}
	tmp, err := os.CreateTemp("", "cardbox-roles-*.sql")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(strings.Join(keep, "\n")); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	psql, err := pgembed.Tool(binDir, "psql")
	if err != nil {
		return err
	}
	if err := runTool(ctx, psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "--file="+tmp.Name(), "--dbname="+url); err != nil {
		return fmt.Errorf("restore the roles: %w", err)
	}
	return nil
}

// ownerRows is the policy, on every table with row-level security, that
// admits the tables' owner (migration 00027): it names the owner role
// the migrations ran as, which the server a backup is restored into need
// not have.
const ownerRows = "owner_rows"

// loadExternal restores pg_dump's archive into the empty database at url,
// on the backup's server or another one, as the role url logs in as,
// which owns every object restored, whoever owned them in the backup (a
// superuser of an embedded cluster, or another role). First cardbox's
// roles are made where missing, as the migrations make them: the dump's
// grants and policies name them. The owner's own policies are left out of
// the dump and made again for the new owner. The dump is loaded in one
// transaction, so that a load that fails leaves the database empty.
func loadExternal(ctx context.Context, binDir, url, file string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer pool.Close()
	if err := migrations.EnsureRoles(ctx, pool); err != nil {
		return fmt.Errorf("restore the database: %w", err)
	}
	bin, err := pgembed.Tool(binDir, "pg_restore")
	if err != nil {
		return err
	}
	list, tables, err := listWithoutOwnerRows(ctx, bin, file)
	if err != nil {
		return fmt.Errorf("restore the database: %w", err)
	}
	defer os.Remove(list)
	if err := runTool(ctx, bin, "--exit-on-error", "--single-transaction", "--no-owner", "--use-list="+list, "--dbname="+url, file); err != nil {
		return fmt.Errorf("restore the database: %w", err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("restore the database: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }() // after the commit: a no-op
	for _, t := range tables {
		if _, err := tx.Exec(ctx, "CREATE POLICY "+ownerRows+" ON "+t.Sanitize()+" TO CURRENT_USER USING (true) WITH CHECK (true)"); err != nil {
			return fmt.Errorf("restore the database: the owner's policy on %s: %w", t.Sanitize(), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("restore the database: %w", err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE"); err != nil {
		return fmt.Errorf("analyze the restored database: %w", err)
	}
	return nil
}

// listWithoutOwnerRows writes the archive's table of contents (pg_restore
// --list) less its owner_rows policies into a temporary file for
// pg_restore --use-list, and returns it with the tables those policies
// were on.
func listWithoutOwnerRows(ctx context.Context, bin, file string) (string, []pgx.Identifier, error) {
	out, err := exec.CommandContext(ctx, bin, "--list", file).Output()
	if err != nil {
		return "", nil, fmt.Errorf("pg_restore --list: %w", toolError(err))
	}
	var keep []string
	var tables []pgx.Identifier
	for _, line := range strings.Split(string(out), "\n") {
		// "3775; 3256 16994 POLICY public analytics_backfills owner_rows cardbox"
		if f := strings.Fields(line); len(f) == 8 && f[3] == "POLICY" && f[6] == ownerRows {
			tables = append(tables, pgx.Identifier{f[4], f[5]})
			continue
		}
		keep = append(keep, line)
	}
	tmp, err := os.CreateTemp("", "cardbox-restore-*.list")
	if err != nil {
		return "", nil, err
	}
	if _, err := tmp.WriteString(strings.Join(keep, "\n")); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", nil, err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", nil, err
	}
	return tmp.Name(), tables, nil
}

// loadDump restores pg_dump's archive into the database at url and
// gathers the planner's statistics, which a dump does not carry.
func loadDump(ctx context.Context, binDir, url, file string) error {
	bin, err := pgembed.Tool(binDir, "pg_restore")
	if err != nil {
		return err
	}
	if err := runTool(ctx, bin, "--exit-on-error", "--dbname="+url, file); err != nil {
		return fmt.Errorf("restore the database: %w", err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		return fmt.Errorf("analyze the restored database: %w", err)
	}
	return nil
}

// finishDataDir builds the pack's index (by scanning the pack, as
// recovery would), records the database, and writes STORE_ID last: a
// directory without it is not a store, so a restore cut short leaves
// nothing a server would start on.
func finishDataDir(dir string, m *Manifest, where datadir.Database) error {
	p, err := blobpack.Open(store.BlobDir(dir), blobpack.Options{MinValidSize: m.Committed.Pack})
	if err != nil {
		return fmt.Errorf("index the restored blob pack: %w", err)
	}
	if err := p.Close(); err != nil {
		return err
	}
	if err := datadir.WriteDatabase(dir, where); err != nil {
		return err
	}
	path := filepath.Join(dir, "STORE_ID")
	if err := writeFileSync(path+tmpSuffix, []byte(m.StoreID+"\n")); err != nil {
		return fmt.Errorf("write STORE_ID: %w", err)
	}
	if err := os.Rename(path+tmpSuffix, path); err != nil {
		return fmt.Errorf("write STORE_ID: %w", err)
	}
	return syncfile.Dir(dir)
}
