package database

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The restart policy of the embedded cluster.
const (
	// watchInterval is how often the supervisor checks that the
	// postmaster runs, and, while the cluster's disk is full, how often
	// it looks at the free space.
	watchInterval = time.Second
	// maxRestartWait is the longest wait between failed restarts, the
	// backoff doubling from watchInterval, when they did not fail for
	// lack of space.
	maxRestartWait = 30 * time.Second
	// diskFullRetry is the wait between restarts that fail for lack of
	// space although the file system has restartHeadroom free (or its
	// free space cannot be read): no backoff, since freeing space is
	// what cures them.
	diskFullRetry = 2 * time.Second
	// restartHeadroom is the free space from which a restart that failed
	// for lack of it is tried again: crash recovery replays the WAL and
	// writes a checkpoint, and the server's first writes may need a new
	// 16 MiB WAL segment; four segments' worth is room for both.
	restartHeadroom = 64 << 20
)

// cluster is what the supervisor needs of the embedded cluster
// (*pgembed.Server).
type cluster interface {
	Running(ctx context.Context) bool
	Restart(ctx context.Context) error
	FreeBytes() (uint64, error)
}

// supervisor restarts the embedded cluster when its postmaster dies. A
// restart that fails is tried again after a backoff (1 s doubling to
// 30 s), except when the cluster's disk is full: Postgres panics when it
// cannot write its WAL, and cannot start again without space. Then the
// supervisor looks at the free space every second and restarts as soon
// as there is restartHeadroom, so that writes resume within about a
// second of an operator freeing space, not after the backoff.
type supervisor struct {
	c   cluster
	log *slog.Logger
	// sleep waits for d unless ctx ends first, reporting whether ctx is
	// live (wait; tests give a fake clock).
	sleep    func(ctx context.Context, d time.Duration) bool
	headroom uint64

	restarts        atomic.Int64 // restarts that succeeded
	failures        atomic.Int64 // restarts that failed
	spaceChecks     atomic.Int64 // looks at the free space while waiting for it
	waitingForSpace atomic.Bool  // the last restart failed for lack of space
}

func newSupervisor(c cluster, log *slog.Logger) *supervisor {
	return &supervisor{c: c, log: log, sleep: wait, headroom: restartHeadroom}
}

// run supervises until ctx ends.
func (s *supervisor) run(ctx context.Context) {
	delay := watchInterval   // until the next look
	backoff := watchInterval // the last wait after a failed restart
	down := false            // the postmaster was seen dead and is not back
	for s.sleep(ctx, delay) {
		delay = watchInterval
		if s.c.Running(ctx) {
			down, backoff = false, watchInterval
			s.waitingForSpace.Store(false)
			continue
		}
		if !down {
			s.log.Error("embedded postgres died; restarting it")
			down = true
		}
		if s.waitingForSpace.Load() {
			s.spaceChecks.Add(1)
			if free, err := s.c.FreeBytes(); err == nil && free < s.headroom {
				continue // look again in a second
			}
		}
		err := s.c.Restart(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			s.restarts.Add(1)
			if s.waitingForSpace.Swap(false) {
				s.log.Info("embedded postgres restarted: its disk has room again")
			} else {
				s.log.Info("embedded postgres restarted")
			}
			down, backoff = false, watchInterval
			continue
		}
		s.failures.Add(1)
		if free, short := s.lackOfSpace(err); short {
			if !s.waitingForSpace.Swap(true) {
				s.log.Error("embedded postgres cannot start: its disk is full; free space on it, and it is restarted within a second of there being room",
					"free_bytes", free, "needs_bytes", s.headroom, "err", err)
			} else {
				s.log.Debug("restart embedded postgres: its disk is still full", "free_bytes", free, "err", err)
			}
			if free >= s.headroom {
				delay = diskFullRetry // room, yet it failed for lack of it
			}
			continue
		}
		s.waitingForSpace.Store(false)
		backoff = min(2*backoff, maxRestartWait)
		delay = backoff
		s.log.Error("restart embedded postgres", "err", err, "retry_in", backoff)
	}
}

// lackOfSpace reports whether a failed restart failed for lack of
// space, and the free space: less than the headroom is left, or
// Postgres said so (its log's tail is in err; the log itself may not
// have been written, on a disk with no room).
func (s *supervisor) lackOfSpace(err error) (free uint64, short bool) {
	free, ferr := s.c.FreeBytes()
	if ferr == nil && free < s.headroom {
		return free, true
	}
	msg := err.Error()
	said := strings.Contains(msg, "No space left on device") || strings.Contains(msg, "Disk quota exceeded")
	if ferr != nil {
		free = 0
		if said {
			free = s.headroom // unknown: retry every diskFullRetry
		}
	}
	return free, said
}

var (
	restartsDesc = prometheus.NewDesc("cardbox_embedded_postgres_restarts_total",
		"Restarts of the embedded Postgres after its postmaster died, by result (ok, failed), since start.", []string{"result"}, nil)
	waitingDesc = prometheus.NewDesc("cardbox_embedded_postgres_waiting_for_space",
		"1 while the embedded Postgres is down because its disk is full: it restarts within a second of there being room.", nil, nil)
	freeDesc = prometheus.NewDesc("cardbox_embedded_postgres_free_bytes",
		"Free space on the file system of the embedded Postgres's data directory (its WAL included).", nil, nil)
)

// Describe implements prometheus.Collector.
func (s *supervisor) Describe(ch chan<- *prometheus.Desc) {
	ch <- restartsDesc
	ch <- waitingDesc
	ch <- freeDesc
}

// Collect implements prometheus.Collector.
func (s *supervisor) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(s.restarts.Load()), "ok")
	ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(s.failures.Load()), "failed")
	waiting := 0.0
	if s.waitingForSpace.Load() {
		waiting = 1
	}
	ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, waiting)
	if free, err := s.c.FreeBytes(); err == nil {
		ch <- prometheus.MustNewConstMetric(freeDesc, prometheus.GaugeValue, float64(free))
	}
}
