package store

import (
	"time"

	"github.com/cardboxhq/cardbox/store/blobpack"
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
//
// The blob pack's counts are of bytes that may be dead, from the pack's
// index (each blob's record and first storer): at a tenant's deletion,
// and at the start, the records of every blob whose first storer is a
// deleted tenant, since such a blob is dead once no tenant claims it,
// which only Postgres knows; the compaction of a segment asks it
// (PackDeadBlobs) and settles the count. A blob claimed still is counted
// again at each deletion: a compaction that finds nothing to drop, never
// a dead blob left uncounted.

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

// DeadBlobSegments returns the segments of the blob pack that may hold
// dead blobs, by start.
func (e *Engine) DeadBlobSegments() []DeadSegment {
	return e.deadBlobs.View(e.blobs.Segments(), func(start int64) bool { return e.sealer.IsSealed(sealer.Blobs, start) })
}

// RolloverBlobs closes the blob pack's active segment early, unless it
// is empty, as RolloverTurns does the turn log's. The segment closed is
// sealed at once (packRolledOver).
func (e *Engine) RolloverBlobs() (bool, error) { return e.blobs.Rollover() }

// settles reports whether a compaction's outcome settles its segment's
// count (deadspace.Tracker.Done): it succeeded, and asked which records
// are dead, which one that only finished an earlier compaction's swap
// (a new generation, no record read) did not.
func settles(res compact.Result, err error) bool {
	return err == nil && (res.New == res.Old || res.Records > 0)
}

// NoteDeadBlobs counts the records of blobs that may have died now (a
// tenant's claims to them released), for the erasure bound: the
// compaction of their segments asks Postgres which are dead.
func (e *Engine) NoteDeadBlobs(hashes []blobpack.Hash) {
	e.noteBlobExtents(e.blobs.ExtentsOf(hashes), func(uint32) time.Time { return e.now() })
}

// noteGoneOwners counts the records of the blobs whose first storer is a
// deleted tenant, each dead since at(its first storer).
func (e *Engine) noteGoneOwners(at func(owner uint32) time.Time) {
	e.noteBlobExtents(e.blobs.ExtentsOwnedBy(e.gate.Gone), at)
}

func (e *Engine) noteBlobExtents(xs []blobpack.Extent, at func(owner uint32) time.Time) {
	if len(xs) == 0 {
		return
	}
	segs := e.blobs.Segments() // listed after the extents: each lies in one
	starts := make([]int64, len(segs))
	for i, s := range segs {
		starts[i] = s.ID.Start
	}
	spans := make([]deadspace.Span, len(xs))
	for i, x := range xs {
		spans[i] = deadspace.Span{Offset: x.Offset, Size: x.Size, At: at(x.Owner)}
	}
	e.deadBlobs.AddSpans(spans, starts)
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
	now := e.now()
	e.noteDead(e.index.Turns.OfTenant(tenant), now)
	e.noteGoneOwners(func(uint32) time.Time { return now })
}
