package salvage_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/filefault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// files lists a directory's file names.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func (s *stopped) sealedRows(stream string) int {
	s.t.Helper()
	var n int
	err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM sealed_segments WHERE stream = $1`, stream).Scan(&n)
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// A store of the single-file layout (blobs.pack, turns.log: what every
// version before segments wrote, and what a store without a segment size
// still writes) opens with small segments as it is: its files become the
// first segments, every turn reads, new appends land in new segments,
// the closed ones are sealed once committed, and verify is clean.
func TestSingleFileStoreUpgradesToSegments(t *testing.T) {
	t.Parallel()
	s := newStopped(t)
	blobDir, logDir := store.BlobDir(s.dir), filepath.Dir(store.TurnLogPath(s.dir))
	if got := files(t, blobDir); !slices.Equal(got, []string{blobpack.IndexFile, blobpack.PackFile}) {
		t.Fatalf("the single-file layout holds %v", got)
	}
	if got := files(t, logDir); !slices.Equal(got, []string{"turns.log"}) {
		t.Fatalf("the single-file layout holds %v", got)
	}

	const segmentSize = 2 << 10
	e, err := store.Open(context.Background(), store.Options{Dir: s.dir, Pool: s.pool, SegmentSize: segmentSize})
	if err != nil {
		t.Fatalf("open the single-file store with segments: %v", err)
	}
	ten, err := e.Tenant(context.Background(), ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		p := []byte(fmt.Sprintf("after the upgrade %d %s", i, strings.Repeat("y", i*11)))
		r, err := e.Append(context.Background(), ten, &store.AppendRequest{
			ContextID: s.ctxID, TypeID: "t", TypeVersion: 1, Encoding: 1,
			UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.payloads[r.TurnID] = p
	}
	// The old files are closed segments now; each is sealed once its
	// bytes are committed, in the background.
	waitfor.True(t, "segments of both files sealed", 30*time.Second, func() bool {
		return s.sealedRows("blobs") > 0 && s.sealedRows("turns") > 0
	})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{blobDir, logDir} {
		if got := files(t, dir); len(got) < 3 {
			t.Fatalf("%s holds %v: the new appends did not land in new segments", dir, got)
		}
	}
	if got := files(t, logDir); got[0] != "turns.log" || !strings.HasPrefix(got[1], "turns.log.") {
		t.Fatalf("turn log segments: %v", got)
	}

	// Every turn reads back (on a store opened without a segment size as
	// well: the last segment then grows without bound), and verify is
	// clean, the sealed segments checked against their BLAKE3.
	all := turns + 60
	checkReads(t, s, all)
	r := s.verify()
	if !r.OK() || r.Turns != all || r.Records != all || r.Sealed != s.sealedRows("blobs")+s.sealedRows("turns") {
		t.Fatalf("verify after the upgrade: %+v", r)
	}

	// A process killed between a rollover and the seal: the next start
	// seals the closed segments again.
	if _, err := s.pool.Exec(context.Background(), `DELETE FROM sealed_segments`); err != nil {
		t.Fatal(err)
	}
	e, err = store.Open(context.Background(), store.Options{Dir: s.dir, Pool: s.pool, SegmentSize: segmentSize})
	if err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "segments sealed again", 30*time.Second, func() bool {
		return s.sealedRows("blobs") > 0 && s.sealedRows("turns") > 0
	})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// A flipped byte in a sealed segment fails verify, and a sealed
	// segment cut short refuses the start.
	filefault.Flip(t, store.TurnLogPath(s.dir), 130)
	if r := s.verify(); r.OK() || r.Counts["sealed segments"] != 1 {
		t.Fatalf("verify after a flipped byte in a sealed segment: %+v", r)
	}
	if err := os.Truncate(store.TurnLogPath(s.dir), turnlog.RecordSize); err != nil {
		t.Fatal(err)
	}
	if e, err := store.Open(context.Background(), store.Options{Dir: s.dir, Pool: s.pool, SegmentSize: segmentSize}); err == nil {
		e.Close()
		t.Fatal("the store started with a sealed segment cut short")
	}
}

// checkReads opens the store without a segment size and reads all its
// turns with their payloads.
func checkReads(t *testing.T, s *stopped, n int) {
	t.Helper()
	e := s.open()
	defer e.Close()
	ten, _ := e.Tenant(context.Background(), ident.DefaultTenantID)
	got, err := e.Last(context.Background(), ten, s.ctxID, uint32(n), true)
	if err != nil || len(got) != n {
		t.Fatalf("%d turns read, %v; want %d", len(got), err, n)
	}
	for _, tr := range got {
		if string(tr.Payload) != string(s.payloads[tr.ID]) {
			t.Fatalf("turn %d reads %q", tr.ID, tr.Payload)
		}
	}
}

// Of two generations of one sealed segment (what a compaction killed
// between writing its rewrite and removing the older file leaves), a
// start keeps the one sealed_segments names and removes the other:
// before the swap committed, the rewrite (here half written); after it,
// the old generation. Generations of a segment sealed as neither are
// refused, left as they are. Every turn reads and verify is clean.
func TestStartKeepsTheGenerationPostgresNames(t *testing.T) {
	t.Parallel()
	s := newStopped(t)
	const segmentSize = 2 << 10
	e, err := store.Open(context.Background(), store.Options{Dir: s.dir, Pool: s.pool, SegmentSize: segmentSize})
	if err != nil {
		t.Fatal(err)
	}
	ten, err := e.Tenant(context.Background(), ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		p := []byte(fmt.Sprintf("generations %d %s", i, strings.Repeat("z", i*13)))
		r, err := e.Append(context.Background(), ten, &store.AppendRequest{
			ContextID: s.ctxID, TypeID: "t", TypeVersion: 1, Encoding: 1,
			UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.payloads[r.TurnID] = p
	}
	waitfor.True(t, "the first segment of the turn log sealed", 30*time.Second, func() bool {
		var n int
		err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM sealed_segments WHERE stream = 'turns' AND start_offset = 0`).Scan(&n)
		return err == nil && n == 1
	})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	all := turns + 40
	logDir := filepath.Dir(store.TurnLogPath(s.dir))
	layout := turnlog.Layout(store.TurnLogPath(s.dir))
	old, rewrite := layout.Path(segment.ID{}), layout.Path(segment.ID{Gen: 1})
	exists := func(path string) bool {
		_, err := os.Stat(path)
		return err == nil
	}
	b, err := os.ReadFile(old)
	if err != nil {
		t.Fatal(err)
	}

	// Killed before the swap: the rewrite, half written, is removed.
	if err := os.WriteFile(rewrite, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	checkReads(t, s, all)
	if exists(rewrite) || !exists(old) {
		t.Fatalf("after a start with an unswapped rewrite: %v", files(t, logDir))
	}

	// Killed after the swap: the old generation is removed.
	if err := os.WriteFile(rewrite, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(context.Background(), `UPDATE sealed_segments SET generation = 1 WHERE stream = 'turns' AND start_offset = 0`); err != nil {
		t.Fatal(err)
	}
	checkReads(t, s, all)
	if !exists(rewrite) || exists(old) {
		t.Fatalf("after a start with a swapped rewrite: %v", files(t, logDir))
	}
	if r := s.verify(); !r.OK() || r.Turns != all {
		t.Fatalf("verify with a rewritten segment: %+v", r)
	}

	// Two generations of a segment Postgres names neither of: refused,
	// both left.
	if _, err := s.pool.Exec(context.Background(), `UPDATE sealed_segments SET generation = 7 WHERE stream = 'turns' AND start_offset = 0`); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if e, err := store.Open(context.Background(), store.Options{Dir: s.dir, Pool: s.pool}); err == nil || !strings.Contains(err.Error(), "both hold the bytes from 0") {
		if err == nil {
			e.Close()
		}
		t.Fatalf("a start with two generations, neither sealed: %v", err)
	}
	if !exists(rewrite) || !exists(old) {
		t.Fatalf("a refused start removed a generation: %v", files(t, logDir))
	}
}
