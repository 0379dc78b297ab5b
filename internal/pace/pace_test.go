package pace

import (
	"context"
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
