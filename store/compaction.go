package store

import (
	"context"
	"fmt"

	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/compact"
	"github.com/cardboxhq/cardbox/store/internal/sealer"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// CompactTurnSegment rewrites the sealed turn-log segment that starts at
// start without the records of dead turns and deleted tenants, and swaps
// the rewrite in (package compact; docs/storage.md, Compaction). A segment without dead
// turns is left as it is. Appends and reads go on meanwhile; compactions
// run one at a time, and Close waits for a running one.
func (e *Engine) CompactTurnSegment(ctx context.Context, start int64) (compact.Result, error) {
	e.compactMu.Lock()
	defer e.compactMu.Unlock()
	if e.closed.Load() {
		return compact.Result{}, fmt.Errorf("compact the turn log: %w", turnlog.ErrClosed)
	}
	seg, err := e.sealedSegment(sealer.Turns, e.turns.Closed(), start)
	if err != nil {
		return compact.Result{}, fmt.Errorf("compact the turn log: %w", err)
	}
	e.deadTurns.Begin(start)
	res, err := compact.Turns(ctx, turnCompaction{e}, turnlog.Layout(TurnLogPath(e.opts.Dir)), seg,
		compact.Options{Hook: e.opts.CompactionHook, Limiter: e.opts.CompactionLimiter})
	e.deadTurns.Done(start, res.Reclaimed(), settles(res, err))
	if err != nil {
		return res, err
	}
	e.logCompacted("turn log segment compacted", seg, res)
	return res, nil
}

// sealedSegment returns the closed segment of stream (sealer.Blobs or
// sealer.Turns) that starts at start, once it is sealed: a segment is
// compacted only once all its bytes are committed.
func (e *Engine) sealedSegment(stream string, closed []segment.Info, start int64) (segment.Info, error) {
	for _, seg := range closed {
		if seg.ID.Start != start {
			continue
		}
		if !e.sealer.IsSealed(stream, start) {
			return segment.Info{}, fmt.Errorf("%s is not sealed yet (its bytes are not all committed)", seg.Path)
		}
		return seg, nil
	}
	return segment.Info{}, fmt.Errorf("no closed segment starts at %d", start)
}

// logCompacted logs a compaction of seg that rewrote it.
func (e *Engine) logCompacted(msg string, seg segment.Info, res compact.Result) {
	if res.New != res.Old {
		e.log.Info(msg, "segment", seg.Path, "generation", res.New.Gen,
			"records", res.Records, "dropped", res.Dropped, "bytes_before", res.Before, "bytes_after", res.After)
	}
}

// CompactTurns compacts every sealed segment of the turn log that holds
// records of dead turns, one after another, and returns what each
// compaction of a segment did.
func (e *Engine) CompactTurns(ctx context.Context) ([]compact.Result, error) {
	return e.CompactTurnsReporting(ctx, nil)
}

// CompactTurnsReporting is CompactTurns telling progress, if set, how
// many of the run's total segments are done: once they are listed (done
// 0, a zero Result), then as each segment's compaction ends, with what it
// did. It is called from this goroutine,
// so it must not block for long: appends go on, but the next segment
// waits.
func (e *Engine) CompactTurnsReporting(ctx context.Context, progress func(done, total int, res compact.Result)) ([]compact.Result, error) {
	return e.CompactTurnSegmentsReporting(ctx, e.sealedStarts(sealer.Turns, e.turns.Closed()), progress)
}

// CompactTurnSegmentsReporting compacts the sealed segments of the turn
// log at starts, one after another, telling progress as
// CompactTurnsReporting does.
func (e *Engine) CompactTurnSegmentsReporting(ctx context.Context, starts []int64,
	progress func(done, total int, res compact.Result)) ([]compact.Result, error) {
	return compactEach(ctx, starts, e.CompactTurnSegment, progress)
}

// turnCompaction is the engine as package compact sees it.
type turnCompaction struct{ e *Engine }

func (c turnCompaction) Sealed(ctx context.Context, start int64) (compact.Sealed, error) {
	return sealedSegment(ctx, c.e, sealer.Turns, start)
}

func (c turnCompaction) Dead(ctx context.Context, turnIDs []uint64) (map[uint64]bool, error) {
	ids := make([]int64, len(turnIDs))
	for i, id := range turnIDs {
		ids[i] = int64(id)
	}
	rows, err := c.e.as(pgrole.Recovery, "").DeadTurnsAmong(ctx, ids)
	if err != nil {
		return nil, err
	}
	dead := make(map[uint64]bool, len(rows))
	for _, id := range rows {
		dead[uint64(id)] = true
	}
	return dead, nil
}

func (c turnCompaction) Swap(ctx context.Context, old segment.ID, rewrite compact.Sealed) error {
	n, err := c.e.as(pgrole.Recovery, "").SwapSealedSegment(ctx, storedb.SwapSealedSegmentParams{
		StoreID: c.e.storeID, Stream: sealer.Turns, StartOffset: old.Start,
		OldGeneration: int32(old.Gen), NewGeneration: int32(rewrite.ID.Gen),
		Length: rewrite.Length, Blake3: rewrite.BLAKE3[:],
	})
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("sealed_segments no longer names generation %d of the turn log segment at %d", old.Gen, old.Start)
	}
	return nil
}

func (c turnCompaction) Install(_ context.Context, rewrite segment.ID) (segment.Info, error) {
	old, err := c.e.turns.ReplaceSegment(rewrite)
	if err != nil {
		return old, err
	}
	c.e.sealer.MarkSealed(sealer.Turns, rewrite)
	return old, nil
}

func (c turnCompaction) Gone(tenant uint32) bool { return c.e.gate.Gone(tenant) }
