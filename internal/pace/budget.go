package pace

import (
	"context"
	"time"
)

// Budget is a share of the time that several background workers draw on
// together (the retention sweeper, the reaper of deleted contexts and its
// release of blob claims). A step of work holds the budget, and so does
// the rest after it, so that together the workers work share of the time,
// one step at a time; each resting on its own, two workers with work
// would take twice the share. A nil Budget never rests.
type Budget struct {
	share float64
	held  chan struct{}
}

// NewBudget returns a budget of share of the time (see Rest).
func NewBudget(share float64) *Budget {
	return &Budget{share: share, held: make(chan struct{}, 1)}
}

// Step runs fn once no other step holds the budget, then rests as Rest
// does for what fn took before it lets the next step run. It returns fn's
// error, else ctx.Err() if ctx ended before or during the rest. A step
// must not take another step of the same budget.
func (b *Budget) Step(ctx context.Context, fn func() error) error {
	if b == nil {
		return fn()
	}
	// A select picks at random among ready cases, so an ended ctx is
	// checked first: it must not start a step.
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case b.held <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.held }()
	start := time.Now()
	err := fn()
	if rest := Rest(ctx, b.share, time.Since(start)); err == nil {
		err = rest
	}
	return err
}
