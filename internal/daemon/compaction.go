package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/cardboxhq/cardbox/api/adminhttp"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/compact"
)

// keptCompactions is how many finished compactions GET
// /admin/compactions/{id} still shows: enough for a client polling the
// one it asked for, not a history (the log has that).
const keptCompactions = 16

// Compaction defaults (cardboxd's flags; docs/operations.md says why).
const (
	DefaultCompactionThreshold = 0.5
	DefaultEraseWithin         = 24 * time.Hour
	DefaultCompactionRate      = 8 << 20
)

// compactionBurst is the most bytes a compaction reads or writes at once
// under the rate limit (its buffers' size), unless an eighth of a
// second of the rate is less: a burst of many seconds' worth would let a
// low rate be passed by that much at every start.
const compactionBurst = 1 << 20

// minCompactionBurst keeps the chunks of a very low rate from being tiny.
const minCompactionBurst = 4 << 10

// compactionBurstOf is the burst of a limiter of bytesPerSecond.
func compactionBurstOf(bytesPerSecond int64) int {
	return int(min(compactionBurst, max(bytesPerSecond/8, minCompactionBurst)))
}

// newCompactionLimiter is the limiter of --compaction-rate bytes per
// second every compaction's reads and writes share.
func newCompactionLimiter(bytesPerSecond int64) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(bytesPerSecond), compactionBurstOf(bytesPerSecond))
}

// compactionPolicy says which segments are compacted without being
// asked: a sealed segment whose dead share reaches the threshold, and any
// segment holding bytes that died longer ago than half the erasure bound
// (the other half is the margin for the check's interval, the seal of a
// segment rolled over early and the compaction itself).
type compactionPolicy struct {
	threshold   float64
	eraseWithin time.Duration
}

// plan returns, of the segments holding dead bytes, those an automatic
// compaction rewrites now, and whether the active segment must be rolled
// over first so that its dead bytes can be (a segment rolled over is
// compacted at a later check, once sealed).
func (p compactionPolicy) plan(now time.Time, segs []store.DeadSegment) (roll bool, starts []int64) {
	for _, s := range segs {
		overdue := s.Dead > 0 && now.Sub(s.Since) >= p.eraseWithin/2
		switch {
		case s.Active:
			roll = roll || overdue
		case !s.Sealed:
			// Closed, not sealed yet: a later check takes it.
		case overdue || float64(s.Dead) >= p.threshold*float64(s.Length):
			starts = append(starts, s.Start)
		}
	}
	return roll, starts
}

// asked is what an operator's request compacts: every segment with dead
// bytes, the active one rolled over first when it holds some.
func asked(segs []store.DeadSegment) (roll bool, starts []int64) {
	for _, s := range segs {
		if s.Active {
			roll = true
			continue
		}
		starts = append(starts, s.Start)
	}
	return roll, starts
}

// compactionStream is one of the store's files compactions rewrite, each
// driven the same way.
type compactionStream struct {
	name string
	// compact runs one compaction of the stream: an operator's request
	// (asked: every pending erasure) or the policy's. progress is told of
	// the segments as CompactTurnsReporting tells them.
	compact func(ctx context.Context, asked bool, progress func(done, total int, res compact.Result)) ([]compact.Result, error)
	// due reports whether an automatic compaction has work in the
	// stream now (nil: never).
	due func(now time.Time) bool
	// dead, if set, lists the stream's segments holding dead bytes.
	dead func() []store.DeadSegment
}

// compactions runs the store's compactions, one at a time, as the
// daemon's background work: those operators ask for
// (adminhttp.Compactor), and those its trigger starts when a segment's
// dead share passes --compaction-threshold or an erasure nears
// --erase-within. Shutdown cancels a running one and waits for it. It
// counts them on /metrics, with each segment's dead bytes.
type compactions struct {
	engine  *store.Engine
	log     *slog.Logger
	policy  compactionPolicy
	now     func() time.Time
	streams []compactionStream
	// life ends at Shutdown; goWork runs a compaction as the daemon's
	// work.
	life   context.Context
	goWork func(func(ctx context.Context))

	mu      sync.Mutex
	seq     int
	runs    []*adminhttp.Compaction // the last keptCompactions, oldest first
	running *adminhttp.Compaction   // nil: none runs

	runsTotal, errorsTotal, reclaimedTotal prometheus.Counter
	deadDesc                               *prometheus.Desc
}

func newCompactions(engine *store.Engine, log *slog.Logger, policy compactionPolicy, now func() time.Time,
	life context.Context, goWork func(func(context.Context))) *compactions {
	if now == nil {
		now = time.Now
	}
	c := &compactions{
		engine: engine, log: log, policy: policy, now: now, life: life, goWork: goWork,
		runsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardbox_compaction_runs_total", Help: "Compactions started, asked for or automatic.",
		}),
		errorsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardbox_compaction_errors_total", Help: "Compactions that failed.",
		}),
		reclaimedTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardbox_compaction_reclaimed_bytes_total", Help: "Bytes compactions gave back to the file system.",
		}),
		deadDesc: prometheus.NewDesc("cardbox_segment_dead_bytes",
			"Bytes of dead records in a segment, until a compaction drops them: in turns, deleted contexts' buried turns and "+
				"deleted tenants'; in blobs, blobs that may have died with a deleted tenant (a compaction asks Postgres). "+
				"Segments without any are not listed.",
			[]string{"stream", "segment"}, nil),
	}
	c.streams = []compactionStream{c.turnStream(), c.blobStream()}
	return c
}

// turnStream is the turn log's: the store counts its dead bytes per
// segment, and the policy picks from them.
func (c *compactions) turnStream() compactionStream {
	e := c.engine
	return c.segmentStream("turns", e.DeadTurnSegments, e.RolloverTurns, e.CompactTurnSegmentsReporting)
}

// blobStream is the blob pack's: the store counts, per segment, the bytes
// of blobs that may be dead (a tenant deleted); the compaction of a
// segment asks Postgres which are, and the count is settled.
func (c *compactions) blobStream() compactionStream {
	e := c.engine
	return c.segmentStream("blobs", e.DeadBlobSegments, e.RolloverBlobs, e.CompactPackSegmentsReporting)
}

// segmentStream drives a stream kept in segments whose dead bytes dead
// lists: rollover closes its active segment early, compactSegments
// compacts sealed ones.
func (c *compactions) segmentStream(name string, dead func() []store.DeadSegment, rollover func() (bool, error),
	compactSegments func(context.Context, []int64, func(int, int, compact.Result)) ([]compact.Result, error)) compactionStream {
	return compactionStream{
		name: name,
		dead: dead,
		due: func(now time.Time) bool {
			roll, starts := c.policy.plan(now, dead())
			return roll || len(starts) > 0
		},
		compact: func(ctx context.Context, ask bool, progress func(int, int, compact.Result)) ([]compact.Result, error) {
			pick := func() (bool, []int64) { return c.policy.plan(c.now(), dead()) }
			if ask {
				pick = func() (bool, []int64) { return asked(dead()) }
			}
			roll, starts := pick()
			if roll {
				if _, err := rollover(); err != nil {
					return nil, fmt.Errorf("close the active segment early: %w", err)
				}
			}
			if ask {
				// Every closed segment, the one closed early included,
				// is compacted in this run, once its records are
				// committed and it is sealed; an automatic run leaves
				// those to a later check.
				if err := waitSealed(ctx, dead); err != nil {
					return nil, err
				}
				_, starts = pick()
			}
			return compactSegments(ctx, starts, progress)
		},
	}
}

// sealWait bounds how long an operator's compaction waits for the seal
// of the segments it compacts.
const sealWait = time.Minute

// waitSealed waits until every closed segment dead lists is sealed (the
// sealer does it once their records are committed, at once in the usual
// case), at most sealWait.
func waitSealed(ctx context.Context, dead func() []store.DeadSegment) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(sealWait)
	defer deadline.Stop()
	for {
		pending := false
		for _, s := range dead() {
			pending = pending || (!s.Active && !s.Sealed)
		}
		if !pending {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the segment closed early to be sealed: %w", ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("closed segments holding dead bytes were not sealed within %v: "+
				"is Postgres answering? (the log has the sealer's warnings)", sealWait)
		case <-tick.C:
		}
	}
}

// Describe implements prometheus.Collector.
func (c *compactions) Describe(ch chan<- *prometheus.Desc) {
	c.runsTotal.Describe(ch)
	c.errorsTotal.Describe(ch)
	c.reclaimedTotal.Describe(ch)
	ch <- c.deadDesc
}

// Collect implements prometheus.Collector.
func (c *compactions) Collect(ch chan<- prometheus.Metric) {
	c.runsTotal.Collect(ch)
	c.errorsTotal.Collect(ch)
	c.reclaimedTotal.Collect(ch)
	for _, st := range c.streams {
		if st.dead == nil {
			continue
		}
		for _, s := range st.dead() {
			ch <- prometheus.MustNewConstMetric(c.deadDesc, prometheus.GaugeValue, float64(s.Dead), st.name, strconv.FormatInt(s.Start, 10))
		}
	}
}

// StartCompaction implements adminhttp.Compactor. The compaction runs
// until it ends or the daemon shuts down, not for the request's life.
func (c *compactions) StartCompaction(_ context.Context, actor string) (adminhttp.Compaction, bool, error) {
	return c.start(adminhttp.CompactionAsked, actor)
}

// start starts a compaction unless one runs, whose copy it returns then.
func (c *compactions) start(trigger, actor string) (adminhttp.Compaction, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running != nil {
		return *c.running, false, nil
	}
	if c.life.Err() != nil {
		return adminhttp.Compaction{}, false, fault.New(fault.Unavailable, "the server is shutting down: no compaction starts")
	}
	c.seq++
	run := &adminhttp.Compaction{ID: strconv.Itoa(c.seq), State: adminhttp.CompactionRunning, Trigger: trigger, StartedAt: time.Now().UTC()}
	c.running = run
	c.runs = append(c.runs, run)
	if len(c.runs) > keptCompactions {
		c.runs = c.runs[len(c.runs)-keptCompactions:]
	}
	c.runsTotal.Inc()
	c.log.Info("compaction started", "compaction", run.ID, "trigger", trigger, "actor", actor)
	c.goWork(func(ctx context.Context) { c.run(ctx, run) })
	return *run, true, nil
}

// run compacts every stream in turn (the turn log, then the blob
// pack), recording progress in run.
func (c *compactions) run(ctx context.Context, run *adminhttp.Compaction) {
	var errs []error
	doneBefore, totalBefore := 0, 0
	for _, st := range c.streams {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		var total int
		_, err := st.compact(ctx, run.Trigger == adminhttp.CompactionAsked, func(done, n int, res compact.Result) {
			c.reclaimedTotal.Add(float64(res.Reclaimed()))
			c.mu.Lock()
			defer c.mu.Unlock()
			total = n
			run.SegmentsDone, run.SegmentsTotal = doneBefore+done, totalBefore+n
			run.BytesReclaimed += res.Reclaimed()
		})
		if err != nil {
			// The other streams are compacted still: an erasure in one
			// does not wait for a failure in another.
			errs = append(errs, fmt.Errorf("compact the %s: %w", st.name, err))
		}
		doneBefore, totalBefore = doneBefore+total, totalBefore+total
	}
	err := errors.Join(errs...)
	c.mu.Lock()
	defer c.mu.Unlock()
	end := time.Now().UTC()
	run.EndedAt = &end
	run.State = adminhttp.CompactionDone
	switch {
	case err != nil && c.life.Err() != nil:
		// Shutdown stopped it between steps: nothing is lost, and the
		// next compaction takes up the segments left; not an error of
		// the store's.
		run.State, run.Error = adminhttp.CompactionFailed, "stopped: the server shut down; ask again once it is back"
		c.log.Warn("compaction stopped by shutdown", "compaction", run.ID, "segments_done", run.SegmentsDone,
			"bytes_reclaimed", run.BytesReclaimed, "err", err)
	case err != nil:
		run.State, run.Error = adminhttp.CompactionFailed, err.Error()
		c.errorsTotal.Inc()
		c.log.Error("compaction failed", "compaction", run.ID, "segments_done", run.SegmentsDone,
			"bytes_reclaimed", run.BytesReclaimed, "err", err)
	default:
		c.log.Info("compaction done", "compaction", run.ID, "trigger", run.Trigger, "segments", run.SegmentsDone,
			"bytes_reclaimed", run.BytesReclaimed, "took", end.Sub(run.StartedAt))
	}
	c.running = nil
}

// watch is the trigger: at every tick until ctx ends, it starts an
// automatic compaction when a stream has work due and none runs.
func (c *compactions) watch(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		c.check()
	}
}

// check starts an automatic compaction if any stream has work due.
func (c *compactions) check() {
	now := c.now()
	for _, st := range c.streams {
		if st.due != nil && st.due(now) {
			if _, _, err := c.start(adminhttp.CompactionAutomatic, "server"); err != nil {
				c.log.Debug("no automatic compaction", "err", err)
			}
			return
		}
	}
}

// compactionCheckEvery is how often the trigger looks at the dead bytes:
// a minute, or often enough for the erasure bound's margin.
func compactionCheckEvery(eraseWithin time.Duration) time.Duration {
	return max(min(time.Minute, eraseWithin/16), time.Second)
}

// Compaction implements adminhttp.Compactor.
func (c *compactions) Compaction(id string) (adminhttp.Compaction, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.runs) == 0 {
		return adminhttp.Compaction{}, false
	}
	if id == "latest" {
		return *c.runs[len(c.runs)-1], true
	}
	for _, r := range c.runs {
		if r.ID == id {
			return *r, true
		}
	}
	return adminhttp.Compaction{}, false
}
