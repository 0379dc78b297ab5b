package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/api/adminhttp"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/compact"
)

// keptCompactions is how many finished compactions GET
// /admin/compactions/{id} still shows: enough for a client polling the
// one it asked for, not a history (the log has that).
const keptCompactions = 16

// compactions runs the turn log's compactions operators ask for
// (adminhttp.Compactor), one at a time, as the daemon's background work:
// Shutdown cancels a running one and waits for it. It counts them on
// /metrics.
type compactions struct {
	engine *store.Engine
	log    *slog.Logger
	// life ends at Shutdown; goWork runs a compaction as the daemon's
	// work.
	life   context.Context
	goWork func(func(ctx context.Context))

	mu      sync.Mutex
	seq     int
	runs    []*adminhttp.Compaction // the last keptCompactions, oldest first
	running *adminhttp.Compaction   // nil: none runs

	runsTotal, errorsTotal, reclaimedTotal prometheus.Counter
}

func newCompactions(engine *store.Engine, log *slog.Logger, life context.Context, goWork func(func(context.Context))) *compactions {
	return &compactions{
		engine: engine, log: log, life: life, goWork: goWork,
		runsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardbox_compaction_runs_total", Help: "Compactions of the turn log started.",
		}),
		errorsTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardbox_compaction_errors_total", Help: "Compactions of the turn log that failed.",
		}),
		reclaimedTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardbox_compaction_reclaimed_bytes_total", Help: "Bytes compactions gave back to the file system.",
		}),
	}
}

// Describe implements prometheus.Collector.
func (c *compactions) Describe(ch chan<- *prometheus.Desc) {
	c.runsTotal.Describe(ch)
	c.errorsTotal.Describe(ch)
	c.reclaimedTotal.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *compactions) Collect(ch chan<- prometheus.Metric) {
	c.runsTotal.Collect(ch)
	c.errorsTotal.Collect(ch)
	c.reclaimedTotal.Collect(ch)
}

// StartCompaction implements adminhttp.Compactor. The compaction runs
// until it ends or the daemon shuts down, not for the request's life.
func (c *compactions) StartCompaction(_ context.Context, actor string) (adminhttp.Compaction, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running != nil {
		return *c.running, false, nil
	}
	if c.life.Err() != nil {
		return adminhttp.Compaction{}, false, fault.New(fault.Unavailable, "the server is shutting down: no compaction starts")
	}
	c.seq++
	run := &adminhttp.Compaction{ID: strconv.Itoa(c.seq), State: adminhttp.CompactionRunning, StartedAt: time.Now().UTC()}
	c.running = run
	c.runs = append(c.runs, run)
	if len(c.runs) > keptCompactions {
		c.runs = c.runs[len(c.runs)-keptCompactions:]
	}
	c.runsTotal.Inc()
	c.log.Info("turn log compaction started", "compaction", run.ID, "actor", actor)
	c.goWork(func(ctx context.Context) { c.run(ctx, run) })
	return *run, true, nil
}

// run compacts the turn log, recording progress in run.
func (c *compactions) run(ctx context.Context, run *adminhttp.Compaction) {
	_, err := c.engine.CompactTurnsReporting(ctx, func(done, total int, res compact.Result) {
		c.reclaimedTotal.Add(float64(res.Reclaimed()))
		c.mu.Lock()
		defer c.mu.Unlock()
		run.SegmentsDone, run.SegmentsTotal = done, total
		run.BytesReclaimed += res.Reclaimed()
	})
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
		c.log.Warn("turn log compaction stopped by shutdown", "compaction", run.ID, "segments_done", run.SegmentsDone,
			"bytes_reclaimed", run.BytesReclaimed, "err", err)
	case err != nil:
		run.State, run.Error = adminhttp.CompactionFailed, fmt.Sprintf("compact the turn log: %v", err)
		c.errorsTotal.Inc()
		c.log.Error("turn log compaction failed", "compaction", run.ID, "segments_done", run.SegmentsDone,
			"bytes_reclaimed", run.BytesReclaimed, "err", err)
	default:
		c.log.Info("turn log compaction done", "compaction", run.ID, "segments", run.SegmentsDone,
			"bytes_reclaimed", run.BytesReclaimed, "took", end.Sub(run.StartedAt))
	}
	c.running = nil
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
