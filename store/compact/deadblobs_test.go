package compact_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
)

// deadBlobSum is the bytes the store counts as possibly dead in the blob
// pack, and in its active segment.
func deadBlobSum(e *store.Engine) (all, active int64) {
	for _, s := range e.DeadBlobSegments() {
		all += s.Dead
		if s.Active {
			active += s.Dead
		}
	}
	return all, active
}

// A tenant's deletion counts the records of its blobs as possibly dead in
// the pack's segments holding them, the active one included, and a
// restart counts the same (from the deleted tenants and the pack's
// index). A forced rollover closes the active segment, sealed though a
// blob stored alone lies past the end the last commit recorded;
// compacting the
// segments counted drops every blob of the tenant, through the rate
// limiter (each segment read twice, its rewrite written once), and
// settles the counts.
func TestDeadBlobsCountedAndCompacted(t *testing.T) {
	s, e := openTwoTenants(t, 1<<10)
	t.Cleanup(func() { e.Close() })
	ctx, dir, pool, lim, def, gone, open := s.ctx, s.dir, s.pool, s.lim, s.def, s.gone, s.open
	live, err := e.CreateContext(ctx, def, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.CreateContext(ctx, gone, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	payload := func() string {
		b := make([]byte, 200)
		rand.Read(b)
		return string(b)
	}
	var liveTurns []uint64
	for range 6 {
		liveTurns = append(liveTurns, appendTo(t, e, def, live.ContextID, payload()))
		appendTo(t, e, gone, other.ContextID, payload())
	}
	appendTo(t, e, gone, other.ContextID, payload()) // in the active segment
	// A blob alone, last: no commit row records the pack's end past it,
	// yet the segment closed early is sealed.
	alone := []byte(payload())
	if _, err := e.PutBlob(ctx, gone, blake3.Sum256(alone), alone); err != nil {
		t.Fatal(err)
	}
	if all, _ := deadBlobSum(e); all != 0 {
		t.Fatalf("%d dead bytes before any deletion", all)
	}
	pgtest.MarkTenantDeleted(t, pool, "gone")
	pgtest.PurgeDeletedTenant(t, pool, "gone")
	if _, err := e.ForgetTenant(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	all, active := deadBlobSum(e)
	if all == 0 || active == 0 {
		t.Fatalf("after the tenant's deletion: %+v; want dead bytes, in the active segment too", e.DeadBlobSegments())
	}
	before := e.DeadBlobSegments()

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = open()
	after := e.DeadBlobSegments()
	if len(after) != len(before) {
		t.Fatalf("after a restart: %+v; before: %+v", after, before)
	}
	for i := range after {
		if after[i].Start != before[i].Start || after[i].Dead != before[i].Dead || after[i].Since.IsZero() ||
			time.Since(after[i].Since) > time.Hour {
			t.Errorf("segment %d after a restart: %+v; before: %+v", i, after[i], before[i])
		}
	}

	if rolled, err := e.RolloverBlobs(); err != nil || !rolled {
		t.Fatalf("RolloverBlobs: %v, %v; want a segment closed", rolled, err)
	}
	if rolled, err := e.RolloverBlobs(); err != nil || rolled {
		t.Fatalf("RolloverBlobs of an empty active segment: %v, %v; want nothing closed", rolled, err)
	}
	var starts []int64
	var read int64
	waitfor.True(t, "the pack's segments counted sealed", 30*time.Second, func() bool {
		starts, read = nil, 0
		for _, s := range e.DeadBlobSegments() {
			if !s.Sealed {
				return false
			}
			starts, read = append(starts, s.Start), read+s.Length
		}
		return true
	})
	lim.mu.Lock()
	lim.taken = 0
	lim.mu.Unlock()
	res, err := e.CompactPackSegmentsReporting(ctx, starts, nil)
	if err != nil {
		t.Fatal(err)
	}
	var dropped int
	var written int64
	for _, r := range res {
		dropped += r.Dropped
		written += r.After
	}
	if dropped != 8 {
		t.Errorf("compactions dropped %d blobs, want the deleted tenant's 8: %+v", dropped, res)
	}
	if all, _ := deadBlobSum(e); all != 0 {
		t.Errorf("after the compaction: %+v, want no dead bytes", e.DeadBlobSegments())
	}
	if want := 2*read + written; lim.taken != want {
		t.Errorf("the limiter was given %d bytes, want %d (read %d twice, wrote %d)", lim.taken, want, read, written)
	}
	for _, id := range liveTurns {
		if _, err := e.TurnPayload(ctx, def, id); err != nil {
			t.Errorf("live turn %d: %v", id, err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	var left int
	defects, err := blobpack.Verify(store.BlobDir(dir), func(en blobpack.Entry) {
		if en.Owner == gone.No {
			left++
		}
	}, nil)
	if err != nil || len(defects) > 0 || left != 0 {
		t.Errorf("verify after the compaction: %d blobs of the deleted tenant left, %v, %v", left, defects, err)
	}
	// Nothing of the tenant is left to count at the next start.
	e = open()
	if all, _ := deadBlobSum(e); all != 0 {
		t.Errorf("after a restart: %+v, want no dead bytes", e.DeadBlobSegments())
	}
}
