// Package deadspace counts, per segment of a stream, the bytes of dead
// records a compaction would drop, and since when the oldest of them has
// waited: what decides which segments are compacted (docs/storage.md,
// Compaction). Nothing on the append path touches it: the counts come
// from recovery (the records it skipped), from burials of dead turns and
// from tenant deletions, and go down as compactions drop records.
package deadspace

import (
	"slices"
	"sync"
	"time"
)

// Segment is what the tracker knows of one segment.
type Segment struct {
	Start int64 // the segment's first logical offset
	// Dead is the bytes of dead records still in its files.
	Dead int64
	// Since is when the oldest of them died (deletion time): the
	// segment must be compacted by Since plus the erasure bound.
	Since time.Time
}

// Tracker counts the dead bytes of the segments of one stream. It is
// safe for concurrent use.
type Tracker struct {
	mu   sync.Mutex
	segs map[int64]*Segment
}

// New returns an empty tracker.
func New() *Tracker { return &Tracker{segs: map[int64]*Segment{}} }

// Add counts bytes of records of the segment at start that died at at.
func (t *Tracker) Add(start, bytes int64, at time.Time) {
	if bytes <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.segs[start]
	if !ok {
		s = &Segment{Start: start, Since: at}
		t.segs[start] = s
	}
	s.Dead += bytes
	if at.Before(s.Since) {
		s.Since = at
	}
}

// Dropped uncounts bytes a compaction of the segment at start dropped.
// Once none is left the segment is forgotten; bytes that died while the
// compaction ran stay counted, with their segment's Since.
func (t *Tracker) Dropped(start, bytes int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.segs[start]
	if !ok {
		return
	}
	s.Dead -= bytes
	if s.Dead <= 0 {
		delete(t.segs, start)
	}
}

// Clear forgets the segment at start: a compaction found nothing of it
// to drop.
func (t *Tracker) Clear(start int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.segs, start)
}

// Segments returns the segments holding dead bytes, by start.
func (t *Tracker) Segments() []Segment {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Segment, 0, len(t.segs))
	for _, s := range t.segs {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Segment) int { return cmpInt(a.Start, b.Start) })
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Ranges collects the offsets of records, in increasing order, as runs
// of adjacent ones, each with the earliest time any of its records died:
// recovery notes the records it skips before it knows the segments, then
// spreads them over the segments (Spread).
type Ranges struct {
	runs []run
}

type run struct {
	from, to int64
	at       time.Time
}

// Note adds the record of size bytes at off, dead since at. Offsets must
// come in increasing order.
func (r *Ranges) Note(off, size int64, at time.Time) {
	if n := len(r.runs); n > 0 && r.runs[n-1].to == off {
		last := &r.runs[n-1]
		last.to = off + size
		if at.Before(last.at) {
			last.at = at
		}
		return
	}
	r.runs = append(r.runs, run{from: off, to: off + size, at: at})
}

// Spread adds the noted bytes to t, each to the segment holding it:
// starts are the segments' starts, in increasing order, the first 0.
func (r *Ranges) Spread(t *Tracker, starts []int64) {
	for _, ru := range r.runs {
		for off := ru.from; off < ru.to; {
			i, found := slices.BinarySearch(starts, off)
			if !found {
				i--
			}
			if i < 0 {
				i = 0
			}
			end := ru.to
			if i+1 < len(starts) {
				end = min(end, starts[i+1])
			}
			t.Add(starts[i], end-off, ru.at)
			off = end
		}
	}
}

// Partition assigns items ordered like the stream's records (turn ids,
// which grow with the offset of their records) to segments: firsts[i] is
// the first item of the segment starting at starts[i], or 0 for a segment
// holding none, and an item is in the last segment whose first is at most
// it. It returns the count of items per segment start.
func Partition(items []uint64, starts []int64, firsts []uint64) map[int64]int64 {
	var keys []uint64
	var segs []int64
	for i, f := range firsts {
		if f != 0 {
			keys, segs = append(keys, f), append(segs, starts[i])
		}
	}
	out := map[int64]int64{}
	for _, it := range items {
		// The last segment whose first is at most it.
		i, found := slices.BinarySearch(keys, it)
		if !found {
			i--
		}
		if i >= 0 {
			out[segs[i]]++
		}
	}
	return out
}

// Firsts caches the first item (turn id) of each segment of a stream,
// read once per segment: what Partition needs. It is safe for concurrent
// use.
type Firsts struct {
	mu sync.Mutex
	m  map[int64]uint64
}

// Of returns the firsts of the segments at starts, reading those not
// cached yet with read, which reports false for a segment holding no item
// (0 is returned for it, and it is asked again next time).
func (f *Firsts) Of(starts []int64, read func(start int64) (uint64, bool)) []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[int64]uint64{}
	}
	out := make([]uint64, len(starts))
	for i, s := range starts {
		id, ok := f.m[s]
		if !ok {
			if id, ok = read(s); ok {
				f.m[s] = id
			}
		}
		out[i] = id
	}
	return out
}
