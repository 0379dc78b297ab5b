package pace

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestRest(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		share    float64
		worked   time.Duration
		atLeast  time.Duration
		wantErr  bool
		atMostMs int64
	}{
		{"no pacing", context.Background(), 0, time.Second, 0, false, 500},
		{"all the time", context.Background(), 1, time.Second, 0, false, 500},
		{"a quarter", context.Background(), 0.25, 20 * time.Millisecond, 60 * time.Millisecond, false, 10_000},
		{"a half", context.Background(), 0.5, 30 * time.Millisecond, 30 * time.Millisecond, false, 10_000},
		{"ended", cancelled, 0.25, time.Hour, 0, true, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := Rest(tc.ctx, tc.share, tc.worked)
			took := time.Since(start)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Rest = %v, want an error: %v", err, tc.wantErr)
			}
			if took < tc.atLeast || took.Milliseconds() > tc.atMostMs {
				t.Fatalf("Rest took %v, want at least %v and at most %d ms", took, tc.atLeast, tc.atMostMs)
			}
		})
	}
}

// Two workers stepping on one budget take turns, each step followed by
// its rest before the other's step starts: with steps of 20 ms at a half,
// four steps take at least 4 × 40 ms, not the 2 × 40 ms of two workers
// resting each on its own.
func TestBudgetIsShared(t *testing.T) {
	b := NewBudget(0.5)
	ctx := context.Background()
	var running atomic.Int32
	overlapped := atomic.Bool{}
	step := func() error {
		if running.Add(1) > 1 {
			overlapped.Store(true)
		}
		defer running.Add(-1)
		time.Sleep(20 * time.Millisecond) // the work a step does
		return nil
	}
	start := time.Now()
	errs := make(chan error, 4)
	for range 2 {
		go func() {
			for range 2 {
				errs <- b.Step(ctx, step)
			}
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 160*time.Millisecond {
		t.Errorf("four steps of 20 ms at a half took %v, want at least 160 ms", took)
	}
	if overlapped.Load() {
		t.Error("two steps ran at once")
	}
}

func TestBudgetStep(t *testing.T) {
	failed := errors.New("step failed")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		b    *Budget
		ctx  context.Context
		fn   func() error
		want error
	}{
		{"nil budget runs the step", nil, cancelled, func() error { return nil }, nil},
		{"the step's error", NewBudget(0.5), context.Background(), func() error { return failed }, failed},
		{"ended before", NewBudget(0.5), cancelled, func() error { return nil }, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.b.Step(tc.ctx, tc.fn); !errors.Is(err, tc.want) {
				t.Fatalf("Step = %v, want %v", err, tc.want)
			}
		})
	}
}
