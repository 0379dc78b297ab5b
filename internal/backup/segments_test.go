package backup_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/backup"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/salvage"
	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// segmentSize is small enough that every 48 KiB blob gets a pack segment
// of its own and the turn log rolls over every 16 turns.
const segmentSize = 2 << 10

// layouts are the live store's two streams.
func (s *liveStore) layouts() []segment.Layout {
	return []segment.Layout{blobpack.Layout(store.BlobDir(s.dir)), turnlog.Layout(store.TurnLogPath(s.dir))}
}

// waitSealed waits until every closed segment of both streams is sealed.
func (s *liveStore) waitSealed(t *testing.T) {
	t.Helper()
	closed := 0
	for _, l := range s.layouts() {
		ids, err := l.List()
		if err != nil {
			t.Fatal(err)
		}
		closed += len(ids) - 1
	}
	waitfor.True(t, "every closed segment sealed", 30*time.Second, func() bool {
		var n int
		if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM sealed_segments`).Scan(&n); err != nil {
			t.Error(err)
			return true
		}
		return n == closed
	})
}

// A store of many segments is backed up segment file by segment file:
// sealed segments are checked against their BLAKE3 and taken over by the
// next backup by name and hash (even once their file is another inode),
// a sealed segment damaged on disk fails the backup, and the restore
// reads every turn back, verify clean, and takes new appends.
func TestBackupOfSegments(t *testing.T) {
	ctx := context.Background()
	s := newLiveStoreWith(t, store.Options{SegmentSize: segmentSize})
	s.appendTurns(t, 40)
	s.waitSealed(t)
	dest := filepath.Join(t.TempDir(), "backup")
	opts := backup.Options{DataDir: s.dir, Dest: dest, DatabaseURL: s.url, SegmentSize: 16 << 10, Rate: -1}
	first, err := backup.Backup(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var packFiles, logFiles, sealed int
	for _, f := range first.Files {
		switch {
		case strings.HasPrefix(f.Path, "blobs/blobs.pack"):
			packFiles++
		case strings.HasPrefix(f.Path, "turns/turns.log"):
			logFiles++
		default:
			t.Fatalf("the backup holds %s", f.Path)
		}
		if f.Sealed != "" {
			sealed++
		}
	}
	if packFiles < 40 || logFiles < 3 || sealed != packFiles+logFiles-2 {
		t.Fatalf("backup of %d pack and %d log segment files, %d sealed: want every segment, all but the last of each sealed", packFiles, logFiles, sealed)
	}
	if total := first.Committed.Pack + first.Committed.TurnLog; first.Copied != total {
		t.Fatalf("first backup copied %d of %d bytes", first.Copied, total)
	}

	// The next backup takes every segment sealed before over.
	s.appendTurns(t, 2)
	s.waitSealed(t)
	second, err := backup.Backup(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var before int64
	for _, f := range first.Files {
		if f.Sealed == "" {
			continue
		}
		before += f.Size
		if got := second.File(f.Path); got == nil || got.Sealed != f.Sealed || len(got.Segments) != len(f.Segments) || got.Segments[0] != f.Segments[0] {
			t.Fatalf("sealed segment %s was not taken over: %+v, then %+v", f.Path, f, got)
		}
	}
	if total := second.Committed.Pack + second.Committed.TurnLog; second.Copied > total-before {
		t.Fatalf("incremental backup copied %d bytes, more than the %d not sealed before", second.Copied, total-before)
	}
	if err := s.engine.Close(); err != nil {
		t.Fatal(err)
	}

	// A sealed segment rewritten with the same bytes (another inode, as a
	// restore or a copy makes) is still taken over; the backup of a
	// stopped store copies nothing.
	moved := filepath.Join(s.dir, filepath.FromSlash(second.Files[1].Path))
	b, err := os.ReadFile(moved)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(moved+".new", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved+".new", moved); err != nil {
		t.Fatal(err)
	}
	third, err := backup.Backup(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if third.Copied != 0 {
		t.Fatalf("backup of an unchanged store copied %d bytes", third.Copied)
	}

	// A sealed segment that changed on disk is not backed up as it is.
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(moved, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = backup.Backup(ctx, backup.Options{DataDir: s.dir, Dest: filepath.Join(t.TempDir(), "fresh"), DatabaseURL: s.url, Rate: -1})
	if err == nil || !strings.Contains(err.Error(), "it was sealed with BLAKE3") {
		t.Fatalf("backup of a damaged sealed segment: %v", err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(moved, b, 0o644); err != nil {
		t.Fatal(err)
	}

	restored := filepath.Join(t.TempDir(), "restored")
	target := emptyDB(t, pgtest.DBName(s.url)+"_restored")
	if _, err := backup.Restore(ctx, backup.RestoreOptions{Src: dest, DataDir: restored, DatabaseURL: target}); err != nil {
		t.Fatal(err)
	}
	for _, f := range third.Files {
		fi, err := os.Stat(filepath.Join(restored, filepath.FromSlash(f.Path)))
		if err != nil || fi.Size() != f.Size {
			t.Fatalf("restored %s: %v, %d bytes of %d", f.Path, err, fi.Size(), f.Size)
		}
	}
	sealedNow := 0
	for _, f := range third.Files {
		if f.Sealed != "" {
			sealedNow++
		}
	}
	pool, err := pgxpool.New(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r, err := salvage.Verify(ctx, restored, pool, nil)
	if err != nil || !r.OK() || r.Sealed != sealedNow {
		var b strings.Builder
		if r != nil {
			r.Print(&b)
		}
		t.Fatalf("verify of the restored store: %v\n%s", err, b.String())
	}
	e, err := store.Open(ctx, store.Options{Dir: restored, Pool: pool, SegmentSize: segmentSize})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s.engine = e
	s.appendTurns(t, 1)
	got, err := e.Last(ctx, s.tenant, s.ctxID, 1000, true)
	if err != nil || len(got) != len(s.payloads) {
		t.Fatalf("restored store reads %d turns (%v), want %d", len(got), err, len(s.payloads))
	}
	for _, tr := range got {
		if string(tr.Payload) != string(s.payloads[tr.ID]) {
			t.Fatalf("turn %d reads other bytes", tr.ID)
		}
	}
}

// A turn log whose sealed segments were compacted (each rewrite shorter
// than its range, a gap after it; some empty) is backed up as it is: each rewrite
// as long as it was sealed, checked against its BLAKE3; the restore
// reads every live turn back and verify is clean.
func TestBackupOfCompactedTurnLog(t *testing.T) {
	ctx := context.Background()
	s := newLiveStoreWith(t, store.Options{SegmentSize: segmentSize})
	doomed, err := s.engine.CreateContext(ctx, s.tenant, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	// Interleaved with live turns, then 40 in a row: a segment or two
	// of dead turns alone, which compact to nothing.
	for i := range 80 {
		if i < 40 || i == 79 {
			s.appendTurns(t, 1)
		}
		p := []byte(fmt.Sprintf("doomed %d", i))
		if _, err := s.engine.Append(ctx, s.tenant, &store.AppendRequest{
			ContextID: doomed.ContextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
			UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.engine.DeleteContext(ctx, s.tenant, doomed.ContextID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.engine.ReapDeleted(ctx); err != nil {
		t.Fatal(err)
	}
	s.waitSealed(t)
	results, err := s.engine.CompactTurns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rewritten, empty := 0, 0
	for _, r := range results {
		if r.New != r.Old {
			rewritten++
		}
		if r.New != r.Old && r.After == 0 {
			empty++
		}
	}
	if rewritten < 3 || empty == 0 {
		t.Fatalf("%d turn-log segments rewritten: %+v", rewritten, results)
	}

	dest := filepath.Join(t.TempDir(), "backup")
	m, err := backup.Backup(ctx, backup.Options{DataDir: s.dir, Dest: dest, DatabaseURL: s.url, Rate: -1})
	if err != nil {
		t.Fatalf("backup of a compacted turn log: %v", err)
	}
	if err := s.engine.Close(); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	target := emptyDB(t, pgtest.DBName(s.url)+"_restored")
	if _, err := backup.Restore(ctx, backup.RestoreOptions{Src: dest, DataDir: restored, DatabaseURL: target}); err != nil {
		t.Fatalf("restore of a compacted turn log: %v", err)
	}
	pool, err := pgxpool.New(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r, err := salvage.Verify(ctx, restored, pool, nil)
	if err != nil || !r.OK() || r.Records != 41 {
		var b strings.Builder
		if r != nil {
			r.Print(&b)
		}
		t.Fatalf("verify of the restored store (%d files backed up): %v\n%s", len(m.Files), err, b.String())
	}
	e, err := store.Open(ctx, store.Options{Dir: restored, Pool: pool, SegmentSize: segmentSize})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got, err := e.Last(ctx, s.tenant, s.ctxID, 1000, true)
	if err != nil || len(got) != len(s.payloads) {
		t.Fatalf("restored store reads %d turns (%v), want %d", len(got), err, len(s.payloads))
	}
	for _, tr := range got {
		if string(tr.Payload) != string(s.payloads[tr.ID]) {
			t.Fatalf("turn %d reads other bytes", tr.ID)
		}
	}
}
