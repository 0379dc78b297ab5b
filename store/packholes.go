package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgbound"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
)

// Records of the blob pack found damaged when read (a flipped byte in
// stored bytes that start-up does not verify) become holes like those
// recovery finds: the pack stops reading them (blobpack.Options.OnDamage),
// and the store logs each at ERROR and records it in pack_holes, where
// cardbox_blob_pack_holes, /healthz and the next start (see
// recheckRecordedHoles) find it. Recording it is off the read path: the
// read queues the hole and returns, and holeRecorder's goroutine inserts
// it, each try bounded by Options.PGTimeout, trying again later while
// Postgres does not answer.

// Retry delays of a hole Postgres did not take.
const (
	holeRetryFirst = time.Second
	holeRetryMax   = time.Minute
)

// holeRecorder queues the holes found when read until they are recorded.
type holeRecorder struct {
	mu    sync.Mutex
	queue []blobpack.Hole
	wake  chan struct{} // holds a token while the queue may be non-empty

	stop context.CancelFunc // nil until started
	done chan struct{}
}

func newHoleRecorder() *holeRecorder {
	return &holeRecorder{wake: make(chan struct{}, 1)}
}

// add queues h; it never waits.
func (r *holeRecorder) add(h blobpack.Hole) {
	r.mu.Lock()
	r.queue = append(r.queue, h)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// next returns the oldest queued hole.
func (r *holeRecorder) next() (blobpack.Hole, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.queue) == 0 {
		return blobpack.Hole{}, false
	}
	return r.queue[0], true
}

// pop removes the oldest queued hole, once recorded.
func (r *holeRecorder) pop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue[0] = blobpack.Hole{}
	r.queue = r.queue[1:]
}

func (r *holeRecorder) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

// onPackDamage is the pack's blobpack.Options.OnDamage: it runs in the
// goroutine of the read that found the damage, so it only logs and
// queues.
func (e *Engine) onPackDamage(h blobpack.Hole) {
	e.log.Error("blob pack: record found damaged when read, kept as a hole; its blob cannot be read (until it is stored again), every other blob can",
		"offset", h.Offset, "end", h.End, "blob", fmt.Sprintf("%x", h.Hash), "reason", h.Reason, "advice", adviceVerify)
	e.holes.add(h)
}

// startHoleRecorder starts the goroutine that records the queued holes;
// Close stops it.
func (e *Engine) startHoleRecorder() {
	ctx, cancel := context.WithCancel(context.Background())
	e.holes.stop, e.holes.done = cancel, make(chan struct{})
	go e.recordQueuedHoles(ctx)
}

// stopHoleRecorder stops the goroutine; holes it did not record yet are
// found again when next read (by this process, were it to go on, or by
// the next).
func (e *Engine) stopHoleRecorder() {
	if e.holes.stop == nil {
		return
	}
	e.holes.stop()
	<-e.holes.done
	if n := e.holes.pending(); n > 0 {
		e.log.Warn("blob pack: damaged records found when read were not recorded in pack_holes before the store closed; "+
			"they are found again when read", "holes", n)
	}
}

func (e *Engine) recordQueuedHoles(ctx context.Context) {
	defer close(e.holes.done)
	delay := holeRetryFirst
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.holes.wake:
		}
		for {
			h, ok := e.holes.next()
			if !ok {
				break
			}
			err := e.recordHole(ctx, h, e.opts.PGTimeout)
			if err == nil {
				e.holes.pop()
				delay = holeRetryFirst
				continue
			}
			if ctx.Err() != nil {
				return
			}
			e.log.Warn("blob pack: could not record a damaged record in pack_holes; trying again",
				"offset", h.Offset, "blob", fmt.Sprintf("%x", h.Hash), "in", delay, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, holeRetryMax)
		}
	}
}

// recordHole records h in pack_holes, once: a hole already recorded (by
// its start offset) is left as it is. timeout > 0 bounds the statement.
func (e *Engine) recordHole(ctx context.Context, h blobpack.Hole, timeout time.Duration) error {
	var hash []byte
	if h.HashKnown {
		hash = h.Hash[:]
	}
	ctx, cancel := pgbound.Context(ctx, timeout)
	defer cancel()
	return e.as(pgrole.Recovery, "").RecordPackHole(ctx, storedb.RecordPackHoleParams{
		StoreID: e.storeID, StartOffset: h.Offset, EndOffset: h.End, BlobHash: hash, Reason: h.Reason,
	})
}

// recheckRecordedHoles reads again each record that pack_holes names by
// its blob and the index still lists there: one an earlier process found
// damaged when read, which Open does not find (it verifies the records of
// the last MiB only). One still damaged is a hole again (the read tells
// onPackDamage); one that reads (its bytes restored) is not. A blob
// stored again since has a later record, which the index lists instead.
func (e *Engine) recheckRecordedHoles(ctx context.Context) error {
	rows, err := e.as(pgrole.Recovery, "").ListPackHoles(ctx, e.storeID)
	if err != nil {
		return fmt.Errorf("list blob pack holes: %w", err)
	}
	for _, r := range rows {
		if len(r.BlobHash) != len(ident.Hash{}) {
			continue
		}
		entry, ok := e.blobs.Lookup(ident.Hash(r.BlobHash))
		if !ok || entry.Offset != r.StartOffset || entry.End() != r.EndOffset {
			continue
		}
		if _, err := e.blobs.ReadEntry(entry); err != nil && !errors.Is(err, blobpack.ErrDamaged) {
			return fmt.Errorf("read blob pack record at %d again: %w", entry.Offset, err)
		}
	}
	return nil
}
