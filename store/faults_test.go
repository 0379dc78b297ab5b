package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit"
)

// Faults heal without a restart: Postgres going away, a full
// disk, one append Postgres refuses.

// openOn opens a store on dir with a pool of url.
func openOn(t *testing.T, dir, url string) *Engine {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e, err := Open(context.Background(), Options{Dir: dir, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestPostgresOutageIsUnavailableWritesNoBlobsAndHeals(t *testing.T) {
	t.Parallel()
	proxy, url := pgtest.NewProxy(t, pgtest.NewDB(t))
	e := openOn(t, t.TempDir(), url)
	ten, err := e.Tenant(context.Background(), ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.CreateContext(context.Background(), ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Append(context.Background(), ten, turnReq(h.ContextID, 0, payloadN(0))); err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	_, err = e.Append(context.Background(), ten, turnReq(h.ContextID, 0, payloadN(1)))
	wantKind(t, err, fault.Unavailable)
	pack := e.Stats().PackBytes // the first failed group may have written its blob
	for i := 2; i < 12; i++ {
		_, err := e.Append(context.Background(), ten, turnReq(h.ContextID, 0, payloadN(i)))
		wantKind(t, err, fault.Unavailable)
	}
	if got := e.Stats().PackBytes; got != pack {
		t.Fatalf("blob pack grew from %d to %d bytes while Postgres was unreachable", pack, got)
	}
	proxy.Restore()
	r, err := e.Append(context.Background(), ten, turnReq(h.ContextID, 0, payloadN(12)))
	if err != nil {
		t.Fatalf("append after Postgres came back: %v", err)
	}
	if turns, err := e.Last(context.Background(), ten, h.ContextID, 10, true); err != nil || len(turns) != 2 || turns[1].ID != r.TurnID {
		t.Fatalf("after the outage: %+v, %v; want the two committed turns", turns, err)
	}
}

func TestOneAppendPostgresRefusesFailsAlone(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	// An operator's rule Postgres enforces and the store cannot know.
	if _, err := s.pool.Exec(context.Background(), `ALTER TABLE turns ADD CONSTRAINT no_poison CHECK (type_id <> 'test.Poison')`); err != nil {
		t.Fatal(err)
	}
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		req := turnReq(h.ContextID, 0, payloadN(i))
		if i == n/2 {
			req.TypeID = "test.Poison"
		}
		wg.Go(func() { _, errs[i] = s.Append(context.Background(), ten, req) })
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case i == n/2 && fault.KindOf(err) != fault.Unprocessable:
			t.Errorf("the poisoned append: %v, want unprocessable", err)
		case i != n/2 && err != nil:
			t.Errorf("append %d failed with the poisoned one: %v", i, err)
		}
	}
	if got := s.countRows("turns"); got != n-1 {
		t.Fatalf("%d turns stored, want %d", got, n-1)
	}
}

// mountTmpfs mounts a tmpfs of size bytes for the test, so that the disk
// really fills up. It needs root (CI runs as root); elsewhere the test is
// skipped, loudly.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		testkit.SkipOrFail(t, "full-disk test: cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	return dir
}

func TestFullDiskFailsOnlyWhatDidNotFitAndHeals(t *testing.T) {
	t.Parallel()
	dir := mountTmpfs(t, 24<<20)
	e := openOn(t, dir, pgtest.NewDB(t))
	ten, err := e.Tenant(context.Background(), ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.CreateContext(context.Background(), ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	// Fill the disk but for a little room.
	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	var acked []AppendResult
	var full error
	for i := 0; full == nil; i++ {
		if i > 100_000 {
			t.Fatal("the disk never filled up")
		}
		r, err := e.Append(context.Background(), ten, turnReq(h.ContextID, 0, randomPayload(i, 64<<10)))
		if err != nil {
			full = err
			break
		}
		acked = append(acked, r)
	}
	wantKind(t, full, fault.DiskFull)
	if err := e.Healthy(context.Background()); err != nil {
		t.Fatalf("the store stopped on a full disk: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r, err := e.Append(context.Background(), ten, turnReq(h.ContextID, 0, randomPayload(-1, 64<<10)))
	if err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
	turns, err := e.Last(context.Background(), ten, h.ContextID, uint32(len(acked)+1), false)
	if err != nil || len(turns) != len(acked)+1 || turns[len(turns)-1].ID != r.TurnID {
		t.Fatalf("after the full disk: %d turns, %v; want %d", len(turns), err, len(acked)+1)
	}
}

// fill writes path until the file system is full, then frees 256 KiB.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(fi.Size() - 256<<10); err != nil {
		t.Fatal(err)
	}
}

// randomPayload is n bytes zstd cannot shrink, distinct for each i.
func randomPayload(i, n int) []byte {
	b := make([]byte, n)
	x := uint64(i)*0x9E3779B97F4A7C15 + 1
	for k := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[k] = byte(x)
	}
	return b
}
