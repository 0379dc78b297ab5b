package store

import (
	"time"

	"github.com/cardboxhq/cardbox/store/compact"
	"github.com/cardboxhq/cardbox/store/internal/deadspace"
	"github.com/cardboxhq/cardbox/store/internal/sealer"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// Dead space: the store counts, per segment of the turn log, the bytes of
// records that are dead (turns buried by the reaper, every turn of a
// deleted tenant) and since when, without reading the segments: from the
// records recovery skipped, then from burials and tenant deletions (see
// package deadspace). A turn record's segment is found by its turn id,
// since turn ids grow with the offsets of their records. Compactions take
// the counts down.

// DeadSegment is a segment of the turn log holding dead records; Active
// is the segment appends write to, which no compaction rewrites before
// RolloverTurns closes it.
type DeadSegment = deadspace.View

// DeadTurnSegments returns the segments of the turn log holding dead
// records, by start.
func (e *Engine) DeadTurnSegments() []DeadSegment {
	return e.deadTurns.View(e.turns.Segments(), func(start int64) bool { return e.sealer.IsSealed(sealer.Turns, start) })
}

// RolloverTurns closes the turn log's active segment early, unless it is
// empty, so that it is sealed once its records are committed and can be
// compacted: deleted bytes in it are then erased within a bound too. It
// reports whether it closed one.
func (e *Engine) RolloverTurns() (bool, error) { return e.turns.Rollover() }

// compacted takes a compaction's dropped records off the segment's count.
func (e *Engine) compacted(res compact.Result) {
	if res.New == res.Old {
		e.deadTurns.Clear(res.Old.Start)
		return
	}
	e.deadTurns.Dropped(res.Old.Start, int64(res.Dropped)*turnlog.RecordSize)
}

// noteDeadTurns counts the records of turns that died at at.
func (e *Engine) noteDeadTurns(ids []int64, at time.Time) {
	items := make([]uint64, len(ids))
	for i, id := range ids {
		items[i] = uint64(id)
	}
	e.noteDead(items, at)
}

func (e *Engine) noteDead(ids []uint64, at time.Time) {
	e.deadTurns.AddItems(ids, turnlog.RecordSize, e.turns.Segments(), func(start int64) (uint64, bool) {
		r, err := e.turns.ReadAt(start)
		return r.TurnID, err == nil
	}, at)
}

// noteDeadTenant counts the records of a tenant deleted now: every turn
// of it in the turn table. Its dead turns are among them: those settled
// but not buried yet never will be (the reaper skips a deleted tenant),
// and those buried since the start, counted then, are counted twice. So
// a segment may be counted more dead bytes than it holds (a compaction
// that finds fewer to drop clears what is left), never fewer: the
// erasure bound holds.
func (e *Engine) noteDeadTenant(tenant uint32) {
	e.noteDead(e.index.Turns.OfTenant(tenant), e.now())
}
