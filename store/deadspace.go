package store

import (
	"cmp"
	"context"
	"slices"

	"time"

	"github.com/cardboxhq/cardbox/store/compact"
	"github.com/cardboxhq/cardbox/store/internal/deadspace"
	"github.com/cardboxhq/cardbox/store/internal/sealer"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// Dead space: the store counts, per segment of the turn log, the bytes of
// records that are dead (turns buried by the reaper, every turn of a
// deleted tenant) and since when, without reading the segments: from the
// records recovery skipped, then from burials and tenant deletions. A
// turn record's segment is found by its turn id, since turn ids grow with
// the offsets of their records. Compactions take the counts down.

// DeadSegment is a segment of the turn log holding dead records.
type DeadSegment struct {
	Start  int64 // the segment's first logical offset, its name
	Length int64 // its bytes (the active one's: when last opened or cut)
	// Dead is the bytes of dead records in it.
	Dead int64
	// Since is when the oldest of them died.
	Since time.Time
	// Active: the segment appends write to, which no compaction
	// rewrites before it is rolled over (RolloverTurns). Sealed: closed
	// and sealed, so a compaction may rewrite it.
	Active, Sealed bool
}

// DeadTurnSegments returns the segments of the turn log holding dead
// records, by start.
func (e *Engine) DeadTurnSegments() []DeadSegment {
	segs := e.turns.Segments()
	length := make(map[int64]int64, len(segs))
	for _, s := range segs {
		length[s.ID.Start] = s.Length
	}
	active := e.turns.Active()
	var out []DeadSegment
	for _, d := range e.deadTurns.Segments() {
		n, ok := length[d.Start]
		if !ok {
			continue // cut away by a truncation
		}
		out = append(out, DeadSegment{
			Start: d.Start, Length: n, Dead: d.Dead, Since: d.Since,
			Active: d.Start == active, Sealed: d.Start != active && e.sealer.IsSealed(sealer.Turns, d.Start),
		})
	}
	return out
}

// RolloverTurns closes the turn log's active segment early, unless it is
// empty, so that it is sealed once its records are committed and can be
// compacted: deleted bytes in it are then erased within a bound too. It
// reports whether it closed one.
func (e *Engine) RolloverTurns() (bool, error) {
	return e.turns.Rollover()
}

// TurnSegmentSealed reports whether the turn log's segment at start is
// closed and sealed.
func (e *Engine) TurnSegmentSealed(start int64) bool {
	return start != e.turns.Active() && e.sealer.IsSealed(sealer.Turns, start)
}

// CompactTurnSegmentsReporting compacts the sealed segments of the turn
// log at starts, one after another, telling progress as
// CompactTurnsReporting does.
func (e *Engine) CompactTurnSegmentsReporting(ctx context.Context, starts []int64,
	progress func(done, total int, res compact.Result)) ([]compact.Result, error) {
	if progress != nil {
		progress(0, len(starts), compact.Result{})
	}
	out := make([]compact.Result, 0, len(starts))
	for _, start := range starts {
		res, err := e.CompactTurnSegment(ctx, start)
		if err != nil {
			return out, err
		}
		out = append(out, res)
		if progress != nil {
			progress(len(out), len(starts), res)
		}
	}
	return out, nil
}

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
	if len(ids) == 0 {
		return
	}
	segs := e.turns.Segments()
	starts := make([]int64, len(segs))
	for i, s := range segs {
		starts[i] = s.ID.Start
	}
	firsts := e.turnFirsts.Of(starts, func(start int64) (uint64, bool) {
		r, err := e.turns.ReadAt(start)
		if err != nil {
			return 0, false
		}
		return r.TurnID, true
	})
	for start, n := range deadspace.Partition(ids, starts, firsts) {
		e.deadTurns.Add(start, n*turnlog.RecordSize, at)
	}
}

// noteDeadTenant counts the records of a tenant deleted now: every turn
// of it in the turn table. Its dead turns are among them: those settled
// but not buried yet never will be (the reaper skips a deleted tenant),
// and those buried since the start, counted then, are counted twice. So
// a segment may be counted more dead bytes than it holds (a compaction
// that finds fewer to drop clears what is left), never fewer: the
// erasure bound holds.
func (e *Engine) noteDeadTenant(tenant uint32) {
	var ids []uint64
	for id, last := uint64(1), e.index.Turns.Visible(); id <= last; id++ {
		if m, ok := e.index.Turns.Get(id); ok && m.Tenant == tenant {
			ids = append(ids, id)
		}
	}
	e.noteDead(ids, e.now())
}

// recoveryTimes are the deletion times recovery reads with the dead
// turns and deleted tenants (unix seconds). The dead turns' are a slice
// sorted by turn id, not a map: there may be millions, each held for the
// start only.
type recoveryTimes struct {
	died    []deathTime
	deleted map[uint32]int64
}

type deathTime struct {
	id uint64
	at int64
}

func (r *recoveryTimes) sort() {
	slices.SortFunc(r.died, func(a, b deathTime) int { return cmp.Compare(a.id, b.id) })
}

// diedAt is when a record recovery skips died: its turn's burial, or its
// tenant's deletion, whichever came first; the zero time when neither is
// known, which makes it overdue at once.
func (r *recoveryTimes) diedAt(rec turnlog.Record) time.Time {
	var at int64
	i, ok := slices.BinarySearchFunc(r.died, rec.TurnID, func(d deathTime, id uint64) int { return cmp.Compare(d.id, id) })
	if ok {
		at = r.died[i].at
	}
	if t, gone := r.deleted[rec.Tenant]; gone && (!ok || t < at) {
		at, ok = t, true
	}
	if !ok {
		return time.Time{}
	}
	return time.Unix(at, 0)
}
