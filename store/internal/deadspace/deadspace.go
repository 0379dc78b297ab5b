// Package deadspace counts, per segment of a stream, the bytes of dead
// records a compaction would drop, and since when the oldest of them has
// waited: what decides which segments are compacted (docs/storage.md,
// Compaction). Nothing on the append path touches it: the counts come
// from recovery (the records it skipped), from burials of dead turns and
// from tenant deletions, and go down as compactions drop records.
package deadspace

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/cardboxhq/cardbox/store/segment"
)

// Segment is what the tracker knows of one segment.
type Segment struct {
	Start int64 // the segment's first logical offset
	// Dead is the bytes of dead records still in its files.
	Dead int64
	// Since is when the oldest of them died (deletion time): the
	// segment must be compacted by Since plus the erasure bound.
	Since time.Time
	// late is the bytes counted since a running compaction of the
	// segment began (Begin): it may not have seen them dead.
	late int64
}

// Tracker counts the dead bytes of the segments of one stream. It is
// safe for concurrent use.
type Tracker struct {
	mu   sync.Mutex
	segs map[int64]*Segment
	// firsts are the segments' first items, for AddItems.
	firsts Firsts
	// running are the segments a compaction runs on (Begin to Done).
	running map[int64]bool
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
	if t.running[start] {
		s.late += bytes
	}
}

// Begin notes that a compaction of the segment at start begins: it asks
// which records are dead after this, so whatever was counted before is
// settled by it (Done), and what is counted from now on is not.
func (t *Tracker) Begin(start int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running == nil {
		t.running = map[int64]bool{}
	}
	t.running[start] = true
	if s, ok := t.segs[start]; ok {
		s.late = 0
	}
}

// Done ends a compaction of the segment at start that Begin began, which
// dropped bytes of dead records (ok) or failed (!ok: the count stays).
// Once it succeeded, the bytes counted before it began are settled:
// dropped, or not dead after all (a count may be too high: a blob still
// claimed, a record counted twice). Those counted since are kept, at
// least: the segment is compacted again for them.
func (t *Tracker) Done(start, dropped int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.running, start)
	s, there := t.segs[start]
	if !there {
		return
	}
	late := s.late
	s.late = 0
	switch {
	case !ok:
	case late == 0:
		delete(t.segs, start)
	default:
		s.Dead = max(s.Dead-dropped, late)
	}
}

// Span is bytes of records from Offset on that died at At.
type Span struct {
	Offset, Size int64
	At           time.Time
}

// AddSpans counts each span in the segment holding its offset: starts
// are the stream's segments' starts, in increasing order.
func (t *Tracker) AddSpans(spans []Span, starts []int64) {
	if len(starts) == 0 {
		return
	}
	for _, sp := range spans {
		i, found := slices.BinarySearch(starts, sp.Offset)
		if !found {
			i--
		}
		t.Add(starts[max(i, 0)], sp.Size, sp.At)
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
	slices.SortFunc(out, func(a, b Segment) int { return cmp.Compare(a.Start, b.Start) })
	return out
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

// AddItems counts records of size bytes each, of items (turn ids) that
// died at at, each in the segment holding it: segs are the stream's
// segments, first reads a segment's first item (Firsts.Of).
func (t *Tracker) AddItems(items []uint64, size int64, segs []segment.Info, first func(start int64) (uint64, bool), at time.Time) {
	if len(items) == 0 {
		return
	}
	starts := make([]int64, len(segs))
	for i, s := range segs {
		starts[i] = s.ID.Start
	}
	for start, n := range Partition(items, starts, t.firsts.Of(starts, first)) {
		t.Add(start, n*size, at)
	}
}

// View is a segment holding dead bytes as the store shows it.
type View struct {
	Start  int64 // the segment's first logical offset, its name
	Length int64 // its bytes (the active one's: when last opened or cut)
	// Dead is the bytes of dead records in it.
	Dead int64
	// Since is when the oldest of them died.
	Since time.Time
	// Active: the segment appends write to, which no compaction
	// rewrites before it is rolled over. Sealed: closed and sealed, so a
	// compaction may rewrite it.
	Active, Sealed bool
}

// View returns the segments holding dead bytes among segs, the stream's
// segments (the last the active one), by start; sealed says whether a
// closed segment is sealed.
func (t *Tracker) View(segs []segment.Info, sealed func(start int64) bool) []View {
	if len(segs) == 0 {
		return nil
	}
	length := make(map[int64]int64, len(segs))
	for _, s := range segs {
		length[s.ID.Start] = s.Length
	}
	active := segs[len(segs)-1].ID.Start
	var out []View
	for _, d := range t.Segments() {
		n, ok := length[d.Start]
		if !ok {
			continue // cut away by a truncation
		}
		out = append(out, View{
			Start: d.Start, Length: n, Dead: d.Dead, Since: d.Since,
			Active: d.Start == active, Sealed: d.Start != active && sealed(d.Start),
		})
	}
	return out
}

// Deaths are the deletion times recovery reads with the dead turns and
// the deleted tenants, for the records it skips. The dead turns' are a
// slice sorted by turn id, not a map: there may be millions, each held
// for the start only.
type Deaths struct {
	died    []death
	deleted map[uint32]int64
}

type death struct {
	id uint64
	at int64 // unix seconds
}

// Turn notes that turn id died at at; call Sorted once every turn is.
func (d *Deaths) Turn(id uint64, at time.Time) {
	d.died = append(d.died, death{id: id, at: at.Unix()})
}

// Sorted makes the turns' times ready for At.
func (d *Deaths) Sorted() {
	slices.SortFunc(d.died, func(a, b death) int { return cmp.Compare(a.id, b.id) })
}

// Tenant notes that tenant number no was deleted at at.
func (d *Deaths) Tenant(no uint32, at time.Time) {
	if d.deleted == nil {
		d.deleted = map[uint32]int64{}
	}
	d.deleted[no] = at.Unix()
}

// TenantAt returns when tenant number no was deleted, if it was.
func (d *Deaths) TenantAt(no uint32) (time.Time, bool) {
	at, ok := d.deleted[no]
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(at, 0), true
}

// At is when the record of turn id of tenant no died: its turn's burial
// or its tenant's deletion, whichever came first; the zero time when
// neither is known, which makes it overdue at once.
func (d *Deaths) At(id uint64, tenant uint32) time.Time {
	var at int64
	i, ok := slices.BinarySearchFunc(d.died, id, func(x death, id uint64) int { return cmp.Compare(x.id, id) })
	if ok {
		at = d.died[i].at
	}
	if t, gone := d.deleted[tenant]; gone && (!ok || t < at) {
		at, ok = t, true
	}
	if !ok {
		return time.Time{}
	}
	return time.Unix(at, 0)
}
