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
