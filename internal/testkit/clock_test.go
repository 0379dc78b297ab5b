package testkit_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/testkit"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	clk := testkit.NewClock(start)
	if got := clk.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	clk.Add(90 * time.Second)
	if got, want := clk.Now(), start.Add(90*time.Second); !got.Equal(want) {
		t.Fatalf("after Add, Now = %v, want %v", got, want)
	}
}

func TestClockRunsTimersThatComeDue(t *testing.T) {
	tests := []struct {
		name    string
		advance []time.Duration
		stop    bool // stop timer "b" before advancing
		want    []string
	}{
		{"none due", []time.Duration{time.Second}, false, nil},
		{"due at the exact time", []time.Duration{2 * time.Second}, false, []string{"a"}},
		{"all due in order made", []time.Duration{time.Minute}, false, []string{"a", "b"}},
		{"due over two moves, once each", []time.Duration{3 * time.Second, time.Minute, time.Minute}, false, []string{"a", "b"}},
		{"stopped never runs", []time.Duration{time.Minute}, true, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testkit.NewClock(start)
			var ran []string
			clk.AfterFunc(2*time.Second, func() { ran = append(ran, "a") })
			b := clk.AfterFunc(5*time.Second, func() { ran = append(ran, "b") })
			if tt.stop && !b.Stop() {
				t.Fatal("Stop of a pending timer = false")
			}
			for _, d := range tt.advance {
				clk.Add(d)
			}
			if !slices.Equal(ran, tt.want) {
				t.Fatalf("ran %v, want %v", ran, tt.want)
			}
		})
	}
}

func TestTimerStopAfterFiring(t *testing.T) {
	clk := testkit.NewClock(start)
	fired := clk.AfterFunc(time.Second, func() {})
	clk.Add(time.Second)
	if fired.Stop() {
		t.Error("Stop of a fired timer = true")
	}
}

// A timer's function may make another timer (as a limiter that re-arms
// does) without deadlocking; the new one waits for a later move.
func TestTimerMayRearm(t *testing.T) {
	clk := testkit.NewClock(start)
	n := 0
	var arm func()
	arm = func() { n++; clk.AfterFunc(time.Second, arm) }
	clk.AfterFunc(time.Second, arm)
	clk.Add(time.Second)
	clk.Add(time.Second)
	if n != 2 {
		t.Fatalf("ran %d times, want 2", n)
	}
}
