package compact_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"
	"golang.org/x/time/rate"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/compact"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// countingLimiter is a rate.Limiter that counts the tokens taken.
type countingLimiter struct {
	lim   *rate.Limiter
	mu    sync.Mutex
	taken int64
	waits int
}

func (c *countingLimiter) WaitN(ctx context.Context, n int) error {
	c.mu.Lock()
	c.taken += int64(n)
	c.waits++
	c.mu.Unlock()
	return c.lim.WaitN(ctx, n)
}

func (c *countingLimiter) Burst() int { return c.lim.Burst() }

// deadSum is the dead bytes the store counts over the turn log, and in
// its sealed segments.
func deadSum(e *store.Engine) (all, sealed int64) {
	for _, s := range e.DeadTurnSegments() {
		all += s.Dead
		if s.Sealed {
			sealed += s.Dead
		}
	}
	return all, sealed
}

func appendTo(t *testing.T, e *store.Engine, ten ident.Tenant, contextID uint64, payload string) uint64 {
	t.Helper()
	p := []byte(payload)
	r, err := e.Append(context.Background(), ten, &store.AppendRequest{
		ContextID: contextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
		UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
	})
	if err != nil {
		t.Fatalf("append to %d: %v", contextID, err)
	}
	return r.TurnID
}

// twoTenants is a store of small segments that compacts through a
// counting limiter (no wait, a burst of 4096), with the default tenant and
// a tenant "gone" for a test to delete.
type twoTenants struct {
	t           *testing.T
	ctx         context.Context
	dir         string
	pool        *pgxpool.Pool
	lim         *countingLimiter
	segmentSize int64
	def, gone   ident.Tenant
}

// openTwoTenants opens such a store of segmentSize-byte segments.
func openTwoTenants(t *testing.T, segmentSize int64) (*twoTenants, *store.Engine) {
	t.Helper()
	s := &twoTenants{
		t: t, ctx: context.Background(), dir: t.TempDir(), pool: pgtest.NewPool(t),
		lim: &countingLimiter{lim: rate.NewLimiter(rate.Inf, 4096)}, segmentSize: segmentSize,
	}
	e := s.open()
	if _, err := s.pool.Exec(s.ctx, `INSERT INTO tenants (tenant_id) VALUES ('gone')`); err != nil {
		e.Close()
		t.Fatal(err)
	}
	var err error
	for id, into := range map[string]*ident.Tenant{ident.DefaultTenantID: &s.def, "gone": &s.gone} {
		if *into, err = e.Tenant(s.ctx, id); err != nil {
			e.Close()
			t.Fatal(err)
		}
	}
	return s, e
}

// open opens the store on its files, again after a Close.
func (s *twoTenants) open() *store.Engine {
	s.t.Helper()
	e, err := store.Open(s.ctx, store.Options{
		Dir: s.dir, Pool: s.pool, SegmentSize: s.segmentSize, FileReserve: -1, CompactionLimiter: s.lim,
	})
	if err != nil {
		s.t.Fatalf("open the store: %v", err)
	}
	return e
}

// The store counts the dead bytes of each turn-log segment without
// reading them: a deleted context's buried turns and a deleted tenant's
// turns as they die, the same again after a restart (from the records
// recovery skipped). A forced rollover closes the active segment, so that
// its dead records too are compacted; compacting what the counts list
// drops every record of both (the deleted tenant's included), through
// the rate limiter, which is given exactly the bytes read and written.
func TestDeadBytesCountedAndCompacted(t *testing.T) {
	s, e := openTwoTenants(t, segmentSize)
	t.Cleanup(func() { e.Close() })
	ctx, dir, pool, lim, def, gone, open := s.ctx, s.dir, s.pool, s.lim, s.def, s.gone, s.open
	live, err := e.CreateContext(ctx, def, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	dead, err := e.CreateContext(ctx, def, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.CreateContext(ctx, gone, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	// 30 rounds of 3 records: about 5.6 segments of 16, the last active.
	var liveTurns []uint64
	for i := range 30 {
		liveTurns = append(liveTurns, appendTo(t, e, def, live.ContextID, fmt.Sprintf("live %d", i)))
		appendTo(t, e, def, dead.ContextID, fmt.Sprintf("dead %d", i))
		appendTo(t, e, gone, other.ContextID, fmt.Sprintf("gone %d", i))
	}
	if all, _ := deadSum(e); all != 0 {
		t.Fatalf("%d dead bytes before any deletion", all)
	}
	if err := e.DeleteContext(ctx, def, dead.ContextID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ReapDeleted(ctx); err != nil {
		t.Fatal(err)
	}
	const perKind = 30 * turnlog.RecordSize
	if all, _ := deadSum(e); all != perKind {
		t.Fatalf("after the burial: %d dead bytes, want %d (%+v)", all, perKind, e.DeadTurnSegments())
	}
	pgtest.MarkTenantDeleted(t, pool, "gone")
	pgtest.PurgeDeletedTenant(t, pool, "gone")
	if _, err := e.ForgetTenant(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if all, _ := deadSum(e); all != 2*perKind {
		t.Fatalf("after the tenant's deletion: %d dead bytes, want %d (%+v)", all, 2*perKind, e.DeadTurnSegments())
	}
	before := e.DeadTurnSegments()

	// A restart counts the same, from the records recovery skips.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = open()
	after := e.DeadTurnSegments()
	if len(after) != len(before) {
		t.Fatalf("after a restart: %+v; before: %+v", after, before)
	}
	for i := range after {
		if after[i].Start != before[i].Start || after[i].Dead != before[i].Dead || after[i].Since.IsZero() {
			t.Errorf("segment %d after a restart: %+v; before: %+v", i, after[i], before[i])
		}
	}
	if last := after[len(after)-1]; !last.Active {
		t.Fatalf("the last segment with dead bytes is not the active one: %+v", after)
	}

	// Close the active segment early; an empty one is not closed.
	if rolled, err := e.RolloverTurns(); err != nil || !rolled {
		t.Fatalf("RolloverTurns: %v, %v; want a segment closed", rolled, err)
	}
	if rolled, err := e.RolloverTurns(); err != nil || rolled {
		t.Fatalf("RolloverTurns of an empty active segment: %v, %v; want nothing closed", rolled, err)
	}
	waitSealed(t, e)
	var starts []int64
	var read int64
	for _, s := range e.DeadTurnSegments() {
		if !s.Sealed {
			t.Fatalf("segment %+v not sealed after the rollover", s)
		}
		starts, read = append(starts, s.Start), read+s.Length
	}
	var progress []int
	res, err := e.CompactTurnSegmentsReporting(ctx, starts, func(done, total int, _ compact.Result) {
		if total != len(starts) {
			t.Errorf("progress total %d, want %d", total, len(starts))
		}
		progress = append(progress, done)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(progress) != len(starts)+1 {
		t.Errorf("progress %v for %d segments", progress, len(starts))
	}
	var dropped int
	var written int64
	for _, r := range res {
		dropped += r.Dropped
		written += r.After
	}
	if dropped != 60 {
		t.Errorf("compactions dropped %d records, want 60 (30 buried, 30 of the deleted tenant): %+v", dropped, res)
	}
	if all, _ := deadSum(e); all != 0 {
		t.Errorf("after the compaction: %+v, want no dead bytes", e.DeadTurnSegments())
	}
	// Each segment is read twice (its turns, then the rewrite's copy)
	// and the rewrite written once.
	if want := 2*read + written; lim.taken != want {
		t.Errorf("the limiter was given %d bytes, want %d (read %d twice, wrote %d)", lim.taken, want, read, written)
	}
	if lim.waits < int(lim.taken/4096) {
		t.Errorf("%d waits for %d bytes with a burst of 4096: more than a burst at a time", lim.waits, lim.taken)
	}
	for _, id := range liveTurns {
		if _, err := e.TurnPayload(ctx, def, id); err != nil {
			t.Errorf("live turn %d: %v", id, err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Offline, no record of either is left.
	var left int
	_, defects, err := turnlog.Scan(store.TurnLogPath(dir), func(_ int64, r turnlog.Record) {
		if r.Tenant == gone.No || r.ContextID == dead.ContextID {
			left++
		}
	})
	if err != nil || len(defects) > 0 || left != 0 {
		t.Errorf("scan after the compaction: %d dead records left, %v, %v", left, defects, err)
	}
	e = open()
	if all, _ := deadSum(e); all != 0 {
		t.Errorf("after a restart: %+v, want no dead bytes", e.DeadTurnSegments())
	}
}
