package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/store"
)

// The policy compacts a sealed segment at the threshold or holding bytes
// deleted half the bound ago, rolls the active segment over for the
// latter only, and leaves closed segments not sealed yet.
func TestCompactionPolicyPlan(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	p := compactionPolicy{threshold: 0.5, eraseWithin: 24 * time.Hour}
	fresh, due := now.Add(-time.Hour), now.Add(-12*time.Hour)
	seg := func(start, length, dead int64, since time.Time, active, sealed bool) store.DeadSegment {
		return store.DeadSegment{Start: start, Length: length, Dead: dead, Since: since, Active: active, Sealed: sealed}
	}
	for _, tt := range []struct {
		name   string
		segs   []store.DeadSegment
		roll   bool
		starts []int64
	}{
		{"nothing dead", nil, false, nil},
		{"below the threshold, recent", []store.DeadSegment{seg(0, 1000, 499, fresh, false, true)}, false, nil},
		{"at the threshold", []store.DeadSegment{seg(0, 1000, 500, fresh, false, true)}, false, []int64{0}},
		{"below the threshold, due", []store.DeadSegment{seg(0, 1000, 1, due, false, true)}, false, []int64{0}},
		{"closed, not sealed", []store.DeadSegment{seg(0, 1000, 1000, due, false, false)}, false, nil},
		{"active, recent", []store.DeadSegment{seg(0, 1000, 1000, fresh, true, false)}, false, nil},
		{"active, due", []store.DeadSegment{seg(0, 1000, 1, due, true, false)}, true, nil},
		{"mixed", []store.DeadSegment{
			seg(0, 1000, 600, fresh, false, true), seg(1000, 1000, 10, fresh, false, true),
			seg(2000, 1000, 10, due, false, true), seg(3000, 500, 5, due, true, false),
		}, true, []int64{0, 2000}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			roll, starts := p.plan(now, tt.segs)
			if roll != tt.roll || !slices.Equal(starts, tt.starts) {
				t.Errorf("plan: roll %v, %v; want %v, %v", roll, starts, tt.roll, tt.starts)
			}
		})
	}
}

// An operator's request takes every segment holding dead bytes, rolling
// the active one over.
func TestCompactionAsked(t *testing.T) {
	roll, starts := asked([]store.DeadSegment{{Start: 0, Dead: 1}, {Start: 10, Dead: 1}, {Start: 20, Dead: 1, Active: true}})
	if !roll || !slices.Equal(starts, []int64{0, 10}) {
		t.Errorf("asked: %v, %v", roll, starts)
	}
}

// The limiter every compaction shares is --compaction-rate bytes a
// second, a compaction's buffer at a time, or an eighth of a second of
// the rate when that is less (but not under 4 KiB).
func TestCompactionLimiter(t *testing.T) {
	for _, tt := range []struct {
		rate  int64
		burst int
	}{
		{1, 4 << 10},
		{16 << 10, 4 << 10},
		{64 << 10, 8 << 10},
		{32 << 20, 1 << 20},
		{1 << 40, 1 << 20},
	} {
		lim := newCompactionLimiter(tt.rate)
		if float64(lim.Limit()) != float64(tt.rate) || lim.Burst() != tt.burst {
			t.Errorf("rate %d: limit %v, burst %d; want burst %d", tt.rate, lim.Limit(), lim.Burst(), tt.burst)
		}
	}
}
