package deadspace

import (
	"maps"
	"testing"
	"time"
)

// Records noted in runs are spread over the segments holding them, a run
// across a boundary split, each segment's Since the earliest of its runs.
func TestRangesSpread(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var r Ranges
	r.Note(0, 10, t0.Add(time.Hour))
	r.Note(10, 10, t0) // adjacent: one run, from t0
	r.Note(40, 10, t0.Add(2*time.Hour))
	r.Note(90, 10, t0.Add(3*time.Hour))
	tr := New()
	r.Spread(tr, []int64{0, 15, 45, 100})
	got := map[int64]Segment{}
	for _, s := range tr.Segments() {
		got[s.Start] = s
	}
	want := map[int64]Segment{
		0:  {Start: 0, Dead: 15, Since: t0},
		15: {Start: 15, Dead: 10, Since: t0},
		45: {Start: 45, Dead: 15, Since: t0.Add(2 * time.Hour)},
	}
	if !maps.Equal(got, want) {
		t.Errorf("spread: %+v, want %+v", got, want)
	}
	tr.Dropped(0, 15)
	tr.Dropped(45, 5)
	tr.Clear(15)
	if s := tr.Segments(); len(s) != 1 || s[0].Start != 45 || s[0].Dead != 10 {
		t.Errorf("after dropping: %+v", s)
	}
}

// Items go to the last segment whose first is at most them; a segment
// without items (first 0) takes none.
func TestPartition(t *testing.T) {
	for _, tt := range []struct {
		name   string
		items  []uint64
		firsts []uint64
		want   map[int64]int64
	}{
		{"each its own", []uint64{1, 5, 9, 12}, []uint64{1, 5, 9}, map[int64]int64{0: 1, 100: 1, 200: 2}},
		{"an empty segment between", []uint64{2, 7, 8}, []uint64{1, 0, 7}, map[int64]int64{0: 1, 200: 2}},
		{"before the first", []uint64{1}, []uint64{3, 5, 9}, map[int64]int64{}},
		{"no items", nil, []uint64{1, 2, 3}, map[int64]int64{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Partition(tt.items, []int64{0, 100, 200}, tt.firsts)
			if !maps.Equal(got, tt.want) {
				t.Errorf("Partition: %v, want %v", got, tt.want)
			}
		})
	}
}

// A compaction that succeeds settles what was counted before it began,
// whatever it dropped (a count may be too high); what was counted while
// it ran stays, at least; a failed one leaves the count as it was.
func TestCompactionSettles(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name    string
		before  int64 // counted before Begin
		during  int64 // counted between Begin and Done
		dropped int64
		ok      bool
		want    int64 // left counted; 0: the segment is forgotten
	}{
		{"all dropped", 100, 0, 100, true, 0},
		{"counted too many", 100, 0, 40, true, 0},
		{"nothing found", 100, 0, 0, true, 0},
		{"counted while it ran", 100, 30, 100, true, 30},
		{"counted while it ran, dropped some of it", 100, 30, 120, true, 30},
		{"counted while it ran, little dropped", 100, 30, 10, true, 120},
		{"only counted while it ran", 0, 30, 0, true, 30},
		{"failed", 100, 30, 0, false, 130},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := New()
			tr.Add(7, tt.before, t0)
			tr.Begin(7)
			tr.Add(7, tt.during, t0.Add(time.Hour))
			tr.Done(7, tt.dropped, tt.ok)
			var got int64
			for _, s := range tr.Segments() {
				if s.Start != 7 {
					t.Errorf("segment %d counted", s.Start)
				}
				got += s.Dead
			}
			if got != tt.want {
				t.Errorf("left %d dead bytes, want %d", got, tt.want)
			}
			// The next compaction, with nothing counted meanwhile,
			// settles the rest.
			tr.Begin(7)
			tr.Done(7, 0, true)
			if s := tr.Segments(); len(s) != 0 {
				t.Errorf("after a second compaction: %+v", s)
			}
		})
	}
}

// Spans go to the segment holding their offset.
func TestAddSpans(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := New()
	tr.AddSpans([]Span{{Offset: 120, Size: 10, At: t0.Add(time.Hour)}, {Offset: 0, Size: 5, At: t0},
		{Offset: 100, Size: 20, At: t0}, {Offset: 250, Size: 1, At: t0}}, []int64{0, 100, 200})
	got := map[int64]Segment{}
	for _, s := range tr.Segments() {
		got[s.Start] = s
	}
	want := map[int64]Segment{
		0:   {Start: 0, Dead: 5, Since: t0},
		100: {Start: 100, Dead: 30, Since: t0},
		200: {Start: 200, Dead: 1, Since: t0},
	}
	if !maps.Equal(got, want) {
		t.Errorf("AddSpans: %+v, want %+v", got, want)
	}
}
