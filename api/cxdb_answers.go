package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
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
	// defaultAnswerBudget is the budget of routes not given the binary
	// server's: one whole blob.
	defaultAnswerBudget = 64 << 20
	defaultAnswerWait   = 5 * time.Second
)

// answerCharge is what one request holds of the answer budget.
type answerCharge struct {
	ctx    context.Context
	budget *membudget.Budget
	wait   time.Duration
	tenant string
	total  int64 // the answer's bytes, as estimated so far
	held   int64 // of which charged
}

func (r *CXDBRoutes) charge(c echo.Context, t ident.Tenant) *answerCharge {
	return &answerCharge{ctx: c.Request().Context(), budget: r.answers, wait: r.answerWait, tenant: t.ID}
}

// reserve adds n bytes to the answer, charging the budget for them once
// the answer is past freeAnswerBytes, waiting for room up to the charge's
// wait.
func (a *answerCharge) reserve(n int64) error {
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

// reserveEntry charges a context list's or search's entry of n bytes.
// Only an answer that holds nothing of the budget yet waits for room, as
// a turn page does (then 503 with Retry-After); one that holds some takes
// more only if there is room now, else it ends before the entry
// (service.ErrAnswerFull: the answer then says it has more). Lists that
// each held part of the budget while waiting for the rest would wait for
// each other. An entry that would take the answer past the tenant's share
// ends it too; when it is the first, the request is 503 as a turn page
// over the share is.
func (a *answerCharge) reserveEntry(n int64) error {
	need := a.total + n
	switch {
	case need > a.budget.Share():
		return fmt.Errorf("%w: %w", service.ErrAnswerFull, answersFull(need, a.budget.Share()))
	case a.held == 0:
		return a.reserve(n)
	case !a.budget.TryAcquire(a.tenant, n):
		return fmt.Errorf("%w: %w", service.ErrAnswerFull, answersFull(n, a.budget.Share()))
	}
	a.total, a.held = need, a.held+n
	return nil
}

// borrow charges n bytes of working memory, the metadata a list's or
// search's filter looks at, until release: it waits for room as reserve
// does, and is 503 past the tenant's share. Batches of at most
// freeAnswerBytes are not charged, as small answers are not.
func (a *answerCharge) borrow(n int64) (release func(), err error) {
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

// settle makes the charge the answer's real size, once built: estimates
// that were too large give back the difference while it is sent.
func (a *answerCharge) settle(size int64) {
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

// release gives back what the answer held; call it once it is sent.
func (a *answerCharge) release() {
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

// writeTurnsPage writes a turn page as it lies in memory, its turns one
// after the other, without copying them into one body: the page is up to
// service.MaxPageBytes.
func writeTurnsPage(c echo.Context, p *service.TurnPage, charge *answerCharge) error {
	head, err := turnsHead(p)
	if err != nil {
		return err
	}
	head = append(head[:len(head)-1], `,"turns":[`...)
	size := len(head) + len("]}")
	for i, t := range p.Turns {
		size += len(t)
		if i > 0 {
			size++
		}
	}
	charge.settle(int64(size))
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	res.Header().Set(echo.HeaderContentLength, strconv.Itoa(size))
	res.WriteHeader(http.StatusOK)
	if _, err := res.Write(head); err != nil {
		return err
	}
	for i, t := range p.Turns {
		if i > 0 {
			if _, err := res.Write([]byte{','}); err != nil {
				return err
			}
		}
		if _, err := res.Write(t); err != nil {
			return err
		}
	}
	_, err = res.Write([]byte("]}"))
	return err
}

// turnsHead is the page's object without its turns.
func turnsHead(p *service.TurnPage) ([]byte, error) {
	out := turnsJSON{
		Meta: turnsMeta{
			ContextID: idString(p.Context.ContextID), HeadTurnID: idString(p.Context.TurnID), HeadDepth: p.Context.Depth,
		},
	}
	if p.BundleID != "" {
		out.Meta.RegistryBundleID = &p.BundleID
	}
	if len(p.Turns) > 0 {
		s := idString(p.Oldest)
		out.NextBeforeTurnID = &s
		if p.HasOlder {
			out.NextCursor = encodeTurnCursor('o', p.Oldest)
		}
		if p.HasNewer {
			out.PrevCursor = encodeTurnCursor('n', p.Newest)
		}
	}
	return json.Marshal(out)
}
