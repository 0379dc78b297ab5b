package daemon_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/api/adminhttp"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/compact"
	"github.com/cardboxhq/cardbox/store/salvage"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// testClock is a settable clock.
type testClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = t
}

// appendOne appends a turn of 300 random bytes to a context.
func appendOne(ctx context.Context, t *testing.T, e *store.Engine, tenant ident.Tenant, contextID uint64) uint64 {
	t.Helper()
	p := make([]byte, 300)
	rand.Read(p)
	return appendPayload(ctx, t, e, tenant, contextID, p)
}

// appendPayload appends a turn with payload p to the context.
func appendPayload(ctx context.Context, t *testing.T, e *store.Engine, tenant ident.Tenant, contextID uint64, p []byte) uint64 {
	t.Helper()
	r, err := e.Append(ctx, tenant, &store.AppendRequest{
		ContextID: contextID, TypeID: "t", TypeVersion: 1, Encoding: 1,
		UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r.TurnID
}

// deadIn sums the store's dead bytes of the turn log: in all segments,
// and in the active one.
func deadIn(e *store.Engine) (all, active int64) {
	for _, s := range e.DeadTurnSegments() {
		all += s.Dead
		if s.Active {
			active += s.Dead
		}
	}
	return all, active
}

// The server compacts by itself: not while sealed segments' dead shares
// are below --compaction-threshold and their deletions recent; once the
// clock passes half of --erase-within, every segment holding the deleted
// bytes, below the threshold too, the active one closed early for it;
// and at once a sealed segment past the threshold, leaving the active
// one, whose deletion is recent. What a compaction leaves is on
// /metrics (cardbox_segment_dead_bytes), and no record of the deleted
// contexts is left in the files.
func TestAutomaticCompaction(t *testing.T) {
	clock := &testClock{at: time.Now()}
	tick := make(chan time.Time)
	var dir string
	// The first rewrite waits for the test at gate.
	gate, held := make(chan struct{}), make(chan struct{}, 1)
	d := daemontest.New(t, func(c *daemon.Config) {
		c.Mode, c.SegmentSize, dir = daemon.ModeHosted, 8*turnlog.RecordSize, c.DataDir
		c.CompactionThreshold, c.EraseWithin = 0.5, 24*time.Hour
		c.Test.Now, c.Test.CompactionTick = clock.Now, tick
		c.Test.CompactionHook = func(s compact.Step) error {
			if s == compact.Written {
				select {
				case held <- struct{}{}:
					<-gate
				default:
				}
			}
			return nil
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	// check has the trigger look at the segments once: the second send
	// is taken once the first check is done.
	check := func() {
		t.Helper()
		for range 2 {
			select {
			case tick <- time.Now():
			case <-ctx.Done():
				t.Fatal("the compaction trigger does not check")
			}
		}
	}
	adm := d.Tenancy()
	if _, err := adm.CreateTenant(ctx, "test", "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	_, opSecret, err := adm.CreateOperatorKey(ctx, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	e := d.Store()
	acme, err := e.Tenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	newContext := func() uint64 {
		h, err := e.CreateContext(ctx, acme, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		return h.ContextID
	}
	live, b, c := newContext(), newContext(), newContext()
	var liveTurns []uint64
	// round appends to the live context and to each of the others one
	// payload: the live turn keeps the tenant's claim to its blob, so
	// that the deletions leave dead bytes in the turn log only (the blob
	// pack's compaction is tested in blobcompaction_test.go).
	round := func(others ...uint64) {
		t.Helper()
		p := make([]byte, 300)
		rand.Read(p)
		liveTurns = append(liveTurns, appendPayload(ctx, t, e, acme, live, p))
		for _, id := range others {
			appendPayload(ctx, t, e, acme, id, p)
		}
	}
	// 11 rounds of live, b, c, c: 5 sealed segments of 8 records and 4
	// in the active one; b's share is a quarter of each.
	for range 11 {
		round(b, c, c)
	}
	deleteContext := func(id uint64) {
		t.Helper()
		if err := d.CXDB().DeleteContext(ctx, acme, id, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.ReapDeleted(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitSealed := func() {
		t.Helper()
		waitfor.True(t, "the closed turn log segments sealed", ioTimeout, func() bool {
			for _, s := range e.DeadTurnSegments() {
				if !s.Active && !s.Sealed {
					return false
				}
			}
			return true
		})
	}
	// waitRun waits for the compaction after the one of id before.
	waitRun := func(before string) adminhttp.Compaction {
		t.Helper()
		var run adminhttp.Compaction
		waitfor.True(t, "an automatic compaction done", ioTimeout, func() bool {
			_, run = adminDo(ctx, t, d, opSecret, http.MethodGet, "/admin/compactions/latest")
			return run.ID != before && run.ID != "" && run.State != adminhttp.CompactionRunning
		})
		if run.State != adminhttp.CompactionDone || run.Trigger != adminhttp.CompactionAutomatic {
			t.Fatalf("compaction %+v; want an automatic one, done", run)
		}
		return run
	}

	deleteContext(b)
	waitSealed()
	all, _ := deadIn(e)
	if all != 11*turnlog.RecordSize {
		t.Fatalf("after deleting b: %d dead bytes, want %d: %+v", all, 11*turnlog.RecordSize, e.DeadTurnSegments())
	}
	var gauge float64
	for k, v := range scrapeAs(t, d, opSecret, "cardbox_segment_dead_bytes") {
		if !strings.Contains(k, `stream="turns"`) {
			t.Errorf("/metrics: %s", k)
		}
		gauge += v
	}
	if gauge != float64(all) {
		t.Errorf("cardbox_segment_dead_bytes sums to %v, want %d", gauge, all)
	}
	// A quarter dead, deleted just now: nothing to do.
	check()
	if status, run := adminDo(ctx, t, d, opSecret, http.MethodGet, "/admin/compactions/latest"); status != http.StatusNotFound {
		t.Fatalf("below the threshold, before the erasure bound's margin: compaction %+v", run)
	}

	// Half the bound later, every segment holding b's bytes goes: the
	// sealed ones now, the active one closed early and compacted at
	// the next check, once sealed.
	clock.Set(time.Now().Add(12*time.Hour + time.Minute))
	check()
	select {
	case <-held:
	case <-ctx.Done():
		close(gate)
		t.Fatal("no automatic compaction began")
	}
	// An operator asking meanwhile gets the automatic one running.
	status, running := adminDo(ctx, t, d, opSecret, http.MethodPost, "/admin/compactions")
	close(gate)
	if status != http.StatusAccepted || running.Trigger != adminhttp.CompactionAutomatic || running.State != adminhttp.CompactionRunning {
		t.Errorf("POST /admin/compactions while an automatic one runs: %d %+v; want 202 and the automatic one", status, running)
	}
	first := waitRun("")
	if first.BytesReclaimed != 10*turnlog.RecordSize || first.SegmentsTotal != 5 {
		t.Errorf("the first automatic compaction: %+v; want b's 10 records of the 5 sealed segments", first)
	}
	waitSealed()
	if all, active := deadIn(e); all != turnlog.RecordSize || active != 0 {
		t.Fatalf("after the first compaction: %+v; want b's last record in the segment closed early", e.DeadTurnSegments())
	}
	check()
	second := waitRun(first.ID)
	if second.BytesReclaimed != turnlog.RecordSize {
		t.Errorf("the second automatic compaction: %+v; want b's last record", second)
	}
	if all, _ := deadIn(e); all != 0 {
		t.Fatalf("after the second compaction: %+v; want no dead bytes", e.DeadTurnSegments())
	}

	// Back to now; c's records are two thirds of the sealed segments: a
	// compaction past the threshold, which leaves c's records in the
	// active segment (a recent deletion).
	clock.Set(time.Now())
	for range 2 {
		round(c)
	}
	deleteContext(c)
	waitSealed()
	check()
	third := waitRun(second.ID)
	all, active := deadIn(e)
	if active != 2*turnlog.RecordSize || all != active {
		t.Errorf("after the compaction past the threshold: %+v; want c's 2 records of the active segment only", e.DeadTurnSegments())
	}
	if third.BytesReclaimed != 22*turnlog.RecordSize {
		t.Errorf("the compaction past the threshold: %+v; want c's 22 records of the sealed segments", third)
	}
	m := scrapeAs(t, d, opSecret, "cardbox_")
	if m["cardbox_compaction_runs_total"] != 3 || m["cardbox_compaction_errors_total"] != 0 ||
		m["cardbox_compaction_reclaimed_bytes_total"] != float64(first.BytesReclaimed+second.BytesReclaimed+third.BytesReclaimed) {
		t.Errorf("/metrics: runs %v, errors %v, reclaimed %v", m["cardbox_compaction_runs_total"], m["cardbox_compaction_errors_total"],
			m["cardbox_compaction_reclaimed_bytes_total"])
	}
	for _, id := range liveTurns {
		if _, err := e.TurnPayload(ctx, acme, id); err != nil {
			t.Errorf("live turn %d: %v", id, err)
		}
	}
	var left []uint64
	_, defects, err := turnlog.Scan(store.TurnLogPath(dir), func(_ int64, r turnlog.Record) {
		if r.ContextID == b {
			left = append(left, r.TurnID)
		}
	})
	if err != nil || len(defects) > 0 || len(left) > 0 {
		t.Errorf("b's records left in the turn log: %v (%v, %v)", left, defects, err)
	}
	report, err := salvage.Verify(ctx, dir, d.Pool(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(report.PackDefects)+len(report.LogDefects)+len(report.Problems) != 0 || report.DeadRecords != 2 {
		t.Errorf("verify: %+v; want clean, with c's 2 records of the active segment dead", report)
	}
}

// The compaction settings are refused at start-up, naming their flag,
// when zero, negative or (the threshold) above 1.
func TestCompactionSettingsRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*daemon.Config)
		want string
	}{
		{"threshold 0", func(c *daemon.Config) { c.CompactionThreshold = 0 }, "--compaction-threshold 0:"},
		{"threshold above 1", func(c *daemon.Config) { c.CompactionThreshold = 1.5 }, "--compaction-threshold 1.5:"},
		{"threshold negative", func(c *daemon.Config) { c.CompactionThreshold = -0.1 }, "--compaction-threshold -0.1:"},
		{"erase-within 0", func(c *daemon.Config) { c.EraseWithin = 0 }, "--erase-within 0s:"},
		{"erase-within negative", func(c *daemon.Config) { c.EraseWithin = -time.Hour }, "--erase-within -1h0m0s:"},
		{"rate 0", func(c *daemon.Config) { c.CompactionRate = 0 }, "--compaction-rate 0:"},
		{"rate negative", func(c *daemon.Config) { c.CompactionRate = -1 }, "--compaction-rate -1:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := daemontest.Config(t)
			opened := false
			cfg.OpenDatabase = func(context.Context, *slog.Logger) (*daemon.Database, error) {
				opened = true
				return nil, errors.New("no database in this test")
			}
			tt.set(&cfg)
			_, err := daemon.New(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) || opened {
				t.Errorf("daemon.New: %v (database opened: %v); want an error naming %q, before the database", err, opened, tt.want)
			}
		})
	}
}
