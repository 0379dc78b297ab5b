// Package pace keeps background work to a share of the time, so that the
// requests beside it keep their speed: after each step of the work, the
// worker rests in proportion to what the step took.
package pace

import (
	"context"
	"time"
)

// Rest waits, after a step of work that took worked, long enough that the
// work takes at most share of the time: worked × (1/share − 1). A share of
// 1 or more, or of 0 or less (no pacing), does not wait. It returns
// ctx.Err() if ctx ends first, else nil.
func Rest(ctx context.Context, share float64, worked time.Duration) error {
	if err := ctx.Err(); err != nil || share <= 0 || share >= 1 || worked <= 0 {
		return err
	}
	t := time.NewTimer(time.Duration(float64(worked) * (1/share - 1)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
