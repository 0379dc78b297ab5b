package daemon_test

import (
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/api/adminhttp"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/salvage"
)

// blobErasure is a server whose blob pack holds the blobs of a tenant
// deleted now ("gone") among those of a live one ("keep"), in segments
// of two blobs, one of each tenant, gone's last blob alone in the active
// segment; one blob gone stored first is claimed by keep too.
type blobErasure struct {
	d         *daemon.Daemon
	e         *store.Engine
	dir       string
	opSecret  string
	gone      ident.Tenant
	shared    blobpack.Hash
	keepTurns []uint64
	keep      ident.Tenant
}

func newBlobErasure(ctx context.Context, t *testing.T, set func(*daemon.Config)) *blobErasure {
	t.Helper()
	f := &blobErasure{}
	f.d = daemontest.New(t, func(c *daemon.Config) {
		c.Mode, c.SegmentSize, f.dir = daemon.ModeHosted, 1<<10, c.DataDir
		if set != nil {
			set(c)
		}
	})
	f.e = f.d.Store()
	adm := f.d.Tenancy()
	for _, id := range []string{"gone", "keep"} {
		if _, err := adm.CreateTenant(ctx, "test", id, id); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if _, f.opSecret, err = adm.CreateOperatorKey(ctx, "test", nil); err != nil {
		t.Fatal(err)
	}
	if f.gone, err = f.e.Tenant(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if f.keep, err = f.e.Tenant(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	newContext := func(ten ident.Tenant) uint64 {
		h, err := f.e.CreateContext(ctx, ten, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		return h.ContextID
	}
	goneCtx, keepCtx := newContext(f.gone), newContext(f.keep)
	appendPayload := func(ten ident.Tenant, contextID uint64, p []byte) uint64 {
		r, err := f.e.Append(ctx, ten, &store.AppendRequest{
			ContextID: contextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
			UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r.TurnID
	}
	shared := make([]byte, 300)
	rand.Read(shared)
	f.shared = blake3.Sum256(shared)
	f.keepTurns = append(f.keepTurns, appendOne(ctx, t, f.e, f.keep, keepCtx))
	appendPayload(f.gone, goneCtx, shared)
	f.keepTurns = append(f.keepTurns, appendPayload(f.keep, keepCtx, shared))
	for range 6 {
		appendOne(ctx, t, f.e, f.gone, goneCtx)
		f.keepTurns = append(f.keepTurns, appendOne(ctx, t, f.e, f.keep, keepCtx))
	}
	appendOne(ctx, t, f.e, f.gone, goneCtx) // last: in the active segment
	if _, err := adm.DeleteTenant(ctx, "test", "gone"); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, "the deleted tenant forgotten", ioTimeout, func() bool { return f.e.Forgotten(f.gone) })
	return f
}

// deadBlobs sums the store's count of possibly dead bytes of the blob
// pack: in all segments, and in the active one.
func deadBlobs(e *store.Engine) (all, active int64) {
	for _, s := range e.DeadBlobSegments() {
		all += s.Dead
		if s.Active {
			active += s.Dead
		}
	}
	return all, active
}

// checkErased checks that no blob gone stored first is left in the
// files, but the one keep claims, that keep's turns read, that nothing is
// counted dead any more, and that verify finds the store clean.
func (f *blobErasure) checkErased(ctx context.Context, t *testing.T) {
	t.Helper()
	var left int
	sharedKept := false
	defects, err := blobpack.Verify(store.BlobDir(f.dir), func(e blobpack.Entry) {
		switch {
		case e.Hash == f.shared:
			sharedKept = true
		case e.Owner == f.gone.No:
			left++
		}
	}, nil)
	if err != nil || len(defects) > 0 {
		t.Fatalf("verify the pack: %v, %v", defects, err)
	}
	if left > 0 || !sharedKept {
		t.Errorf("after the compaction: %d blobs of the deleted tenant left in the pack (want 0); the blob keep claims kept: %v",
			left, sharedKept)
	}
	for _, id := range f.keepTurns {
		if _, err := f.e.TurnPayload(ctx, f.keep, id); err != nil {
			t.Errorf("keep's turn %d: %v", id, err)
		}
	}
	if all, _ := deadBlobs(f.e); all != 0 {
		t.Errorf("after the compaction: %+v; want no dead bytes counted in the pack", f.e.DeadBlobSegments())
	}
	report, err := salvage.Verify(ctx, f.dir, f.d.Pool(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(report.PackDefects)+len(report.LogDefects)+len(report.Problems) != 0 {
		t.Errorf("verify: %+v; want clean", report)
	}
}

// A tenant's deletion counts its blobs' bytes as possibly dead in the
// segments of the blob pack holding them, the active one included
// (cardbox_segment_dead_bytes{stream="blobs"}); an operator's compaction
// closes the active segment early, waits for its seal and drops every
// blob of the tenant no other tenant claims, from every segment.
func TestRequestedCompactionErasesDeletedTenantsBlobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*ioTimeout)
	defer cancel()
	f := newBlobErasure(ctx, t, nil)
	all, active := deadBlobs(f.e)
	if all == 0 || active == 0 {
		t.Fatalf("after the tenant's deletion: %+v; want dead bytes counted, in the active segment too", f.e.DeadBlobSegments())
	}
	var gauge float64
	for k, v := range scrapeAs(t, f.d, f.opSecret, "cardbox_segment_dead_bytes") {
		if strings.Contains(k, `stream="blobs"`) {
			gauge += v
		}
	}
	if gauge != float64(all) {
		t.Errorf(`cardbox_segment_dead_bytes{stream="blobs"} sums to %v, want %d`, gauge, all)
	}

	status, run := adminDo(ctx, t, f.d, f.opSecret, http.MethodPost, "/admin/compactions")
	if status != http.StatusAccepted {
		t.Fatalf("POST /admin/compactions: %d", status)
	}
	waitfor.True(t, "the compaction done", 2*ioTimeout, func() bool {
		_, run = adminDo(ctx, t, f.d, f.opSecret, http.MethodGet, "/admin/compactions/"+run.ID)
		return run.State != adminhttp.CompactionRunning
	})
	if run.State != adminhttp.CompactionDone || run.BytesReclaimed == 0 {
		t.Fatalf("compaction %+v; want done, bytes given back", run)
	}
	f.checkErased(ctx, t)
}

// Half of --erase-within after a tenant's deletion, the server compacts
// the blob pack by itself, though no segment's dead share reaches
// --compaction-threshold: the sealed segments holding the tenant's blobs
// at once, the active one closed early and compacted at the next check,
// once sealed.
func TestAutomaticCompactionErasesDeletedTenantsBlobs(t *testing.T) {
	clock := &testClock{at: time.Now()}
	tick := make(chan time.Time)
	ctx, cancel := context.WithTimeout(context.Background(), 2*ioTimeout)
	defer cancel()
	f := newBlobErasure(ctx, t, func(c *daemon.Config) {
		c.CompactionThreshold, c.EraseWithin = 0.9, 24*time.Hour
		c.Test.Now, c.Test.CompactionTick = clock.Now, tick
	})
	check := func() {
		t.Helper()
		for range 2 { // the second send is taken once the first check is done
			select {
			case tick <- time.Now():
			case <-ctx.Done():
				t.Fatal("the compaction trigger does not check")
			}
		}
	}
	waitRun := func(before string) adminhttp.Compaction {
		t.Helper()
		var run adminhttp.Compaction
		waitfor.True(t, "an automatic compaction done", 2*ioTimeout, func() bool {
			_, run = adminDo(ctx, t, f.d, f.opSecret, http.MethodGet, "/admin/compactions/latest")
			return run.ID != before && run.ID != "" && run.State != adminhttp.CompactionRunning
		})
		if run.State != adminhttp.CompactionDone || run.Trigger != adminhttp.CompactionAutomatic {
			t.Fatalf("compaction %+v; want an automatic one, done", run)
		}
		return run
	}
	if _, active := deadBlobs(f.e); active == 0 {
		t.Fatalf("after the tenant's deletion: %+v; want dead bytes in the active segment", f.e.DeadBlobSegments())
	}
	// Deleted just now, half of each segment: nothing to do yet.
	check()
	if status, run := adminDo(ctx, t, f.d, f.opSecret, http.MethodGet, "/admin/compactions/latest"); status != http.StatusNotFound {
		t.Fatalf("below the threshold, before the erasure bound's margin: compaction %+v", run)
	}

	clock.Set(time.Now().Add(12*time.Hour + time.Minute))
	check()
	first := waitRun("")
	if first.BytesReclaimed == 0 {
		t.Errorf("the first automatic compaction: %+v; want the sealed segments' dead blobs dropped", first)
	}
	waitfor.True(t, "the pack's segment closed early sealed", ioTimeout, func() bool {
		for _, s := range f.e.DeadBlobSegments() {
			if !s.Sealed {
				return false
			}
		}
		return true
	})
	if all, active := deadBlobs(f.e); all == 0 || active != 0 {
		t.Fatalf("after the first compaction: %+v; want the last blob in the segment closed early", f.e.DeadBlobSegments())
	}
	check()
	waitRun(first.ID)
	f.checkErased(ctx, t)
}
