// Package holerecorder records the blob pack's records found damaged when
// read (a flipped byte in stored bytes that start-up does not verify) in
// pack_holes, where the metrics, /healthz and the next start find them.
// Recording is off the read path: the read queues the hole and returns,
// and the Recorder's goroutine records it, trying again later while
// Postgres does not answer.
package holerecorder

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cardboxhq/cardbox/store/blobpack"
)

// Retry delays of a hole Postgres did not take.
const (
	retryFirst = time.Second
	retryMax   = time.Minute
)

// RecordFunc records one hole in Postgres, bounding its own statement; a
// hole recorded before (by its start offset) is left as it is.
type RecordFunc func(ctx context.Context, h blobpack.Hole) error

// Recorder queues the holes found when read until they are recorded. Add
// may be called before Start (recovery's reads find holes too); Stop ends
// the goroutine Start started.
type Recorder struct {
	record RecordFunc
	log    *slog.Logger

	mu    sync.Mutex
	queue []blobpack.Hole
	wake  chan struct{} // holds a token while the queue may be non-empty

	stop context.CancelFunc // nil until started
	done chan struct{}
}

// New returns a Recorder that records holes with record.
func New(record RecordFunc, log *slog.Logger) *Recorder {
	return &Recorder{record: record, log: log, wake: make(chan struct{}, 1)}
}

// Add queues h; it never waits.
func (r *Recorder) Add(h blobpack.Hole) {
	r.mu.Lock()
	r.queue = append(r.queue, h)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Start starts the goroutine that records the queued holes.
func (r *Recorder) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.stop, r.done = cancel, make(chan struct{})
	go r.run(ctx)
}

// Stop stops the goroutine, if it was started; holes it did not record
// yet are found again when next read (by this process, were it to go on,
// or by the next).
func (r *Recorder) Stop() {
	if r.stop == nil {
		return
	}
	r.stop()
	<-r.done
	if n := r.pending(); n > 0 {
		r.log.Warn("blob pack: damaged records found when read were not recorded in pack_holes before the store closed; "+
			"they are found again when read", "holes", n)
	}
}

// next returns the oldest queued hole.
func (r *Recorder) next() (blobpack.Hole, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return blobpack.Hole{}, false
	}
	return r.queue[0], true
}

// pop removes the oldest queued hole, once recorded.
func (r *Recorder) pop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue[0] = blobpack.Hole{}
	r.queue = r.queue[1:]
}

func (r *Recorder) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

func (r *Recorder) run(ctx context.Context) {
	defer close(r.done)
	delay := retryFirst
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		for {
			h, ok := r.next()
			if !ok {
				break
			}
			err := r.record(ctx, h)
			if err == nil {
				r.pop()
				delay = retryFirst
				continue
			}
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("blob pack: could not record a damaged record in pack_holes; trying again",
				"offset", h.Offset, "blob", fmt.Sprintf("%x", h.Hash), "in", delay, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, retryMax)
		}
	}
}
