// Package answers charges the HTTP surfaces' large answers to the memory
// budget they share with the binary port, while the answers are built and
// sent.
package answers

import (
	"context"
	"fmt"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/membudget"
)

// Large answers (turn pages, context lists and searches, blobs, files,
// directory listings, the type list) are charged to a memory budget
// while they are built and sent: the binary port's answer budget, shared
// by tenants as --tenant-memory-share says, so that the two surfaces
// together hold at most it. A request that finds no room within
// AnswerWait is refused 503 with Retry-After. Answers of at most
// freeAnswerBytes are not charged, as on the binary port, so that small
// requests stay fast while large ones spend the budget.
const (
	freeAnswerBytes = 64 << 10
	// DefaultBudget is the budget of routes not given the binary
	// server's: one whole blob.
	DefaultBudget = 64 << 20
	// DefaultWait is how long a request waits for room by default.
	DefaultWait = 5 * time.Second
)

// Charge is what one request holds of the answer budget.
type Charge struct {
	ctx    context.Context
	budget *membudget.Budget
	wait   time.Duration
	tenant string
	total  int64 // the answer's bytes, as estimated so far
	held   int64 // of which charged
}

// NewCharge starts what a request of tenant, whose context is ctx, holds
// of budget, waiting at most wait for room; the caller releases it once
// the answer is sent.
func NewCharge(ctx context.Context, budget *membudget.Budget, wait time.Duration, tenant string) *Charge {
	return &Charge{ctx: ctx, budget: budget, wait: wait, tenant: tenant}
}

// Total is the answer's bytes as estimated so far.
func (a *Charge) Total() int64 { return a.total }

// Reserve adds n bytes to the answer, charging the budget for them once
// the answer is past freeAnswerBytes, waiting for room up to the charge's
// wait.
func (a *Charge) Reserve(n int64) error {
	a.total += n
	if a.total <= freeAnswerBytes {
		return nil
	}
	need := a.total - a.held
	if a.total > a.budget.Share() {
		return answersFull(a.total, a.budget.Share())
	}
	ctx, cancel := context.WithTimeout(a.ctx, a.wait)
	defer cancel()
	if err := a.budget.Acquire(ctx, a.tenant, need); err != nil {
		if a.ctx.Err() != nil {
			return a.ctx.Err() // the client left: 499
		}
		return answersFull(need, a.budget.Share())
	}
	a.held += need
	return nil
}

// ReserveEntry charges a context list's or search's entry of n bytes.
// Only an answer that holds nothing of the budget yet waits for room, as
// a turn page does (then 503 with Retry-After); one that holds some takes
// more only if there is room now, else it ends before the entry
// (service.ErrAnswerFull: the answer then says it has more). Lists that
// each held part of the budget while waiting for the rest would wait for
// each other. An entry that would take the answer past the tenant's share
// ends it too; when it is the first, the request is 503 as a turn page
// over the share is.
func (a *Charge) ReserveEntry(n int64) error {
	need := a.total + n
	switch {
	case need > a.budget.Share():
		return fmt.Errorf("%w: %w", service.ErrAnswerFull, answersFull(need, a.budget.Share()))
	case a.held == 0:
		return a.Reserve(n)
	case !a.budget.TryAcquire(a.tenant, n):
		return fmt.Errorf("%w: %w", service.ErrAnswerFull, answersFull(n, a.budget.Share()))
	}
	a.total, a.held = need, a.held+n
	return nil
}

// Borrow charges n bytes of working memory, the metadata a list's or
// search's filter looks at, until release: it waits for room as reserve
// does, and is 503 past the tenant's share. Batches of at most
// freeAnswerBytes are not charged, as small answers are not.
func (a *Charge) Borrow(n int64) (release func(), err error) {
	if n <= freeAnswerBytes {
		return func() {}, nil
	}
	if n > a.budget.Share() {
		return nil, answersFull(n, a.budget.Share())
	}
	ctx, cancel := context.WithTimeout(a.ctx, a.wait)
	defer cancel()
	if err := a.budget.Acquire(ctx, a.tenant, n); err != nil {
		if a.ctx.Err() != nil {
			return nil, a.ctx.Err() // the client left: 499
		}
		return nil, answersFull(n, a.budget.Share())
	}
	return func() { a.budget.Release(a.tenant, n) }, nil
}

// Settle makes the charge the answer's real size, once built: estimates
// that were too large give back the difference while it is sent.
func (a *Charge) Settle(size int64) {
	a.total = size
	keep := size
	if size <= freeAnswerBytes {
		keep = 0
	}
	if keep < a.held {
		a.budget.Release(a.tenant, a.held-keep)
		a.held = keep
	}
}

// Release gives back what the answer held; call it once it is sent.
func (a *Charge) Release() {
	if a.held > 0 {
		a.budget.Release(a.tenant, a.held)
		a.held = 0
	}
}

// answersFull refuses an answer for which the budget has no room.
func answersFull(need, share int64) *fault.Error {
	e := fault.New(fault.Unavailable, "no memory for this answer now: the answers in progress hold the budget large answers share; retry shortly")
	e.Details = map[string]any{"needed_bytes": need, "share_bytes": share}
	return e
}

// StringLen is at least the length of s as a JSON string, quotes
// included: every byte escaped at most to six. Answers estimated before
// they are built use it for their strings.
func StringLen(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b < 0x20 || b == '<' || b == '>' || b == '&' || b >= 0x80:
			n += 6
		case b == '"' || b == '\\':
			n += 2
		default:
			n++
		}
	}
	return n
}
