package server

import (
	"context"

	"github.com/cardboxhq/cardbox/internal/membudget"
)

// budget is a byte budget shared by all sessions, of which one tenant may
// hold at most a share (membudget.Budget). The answer budget is shared
// with the CXDB HTTP API's answers (Server.ReplyBudget).
type budget struct{ *membudget.Budget }

// newBudget returns a budget of total bytes of which a tenant may hold
// fraction (at least minShare, the largest single charge); a fraction of
// 0 or 1 gives no shares.
func newBudget(total int64, fraction float64, minShare int64) *budget {
	return &budget{membudget.New(total, fraction, minShare)}
}

// acquire takes n bytes for tenant, waiting for room in its share and then
// in the whole budget, until ctx ends.
func (b *budget) acquire(ctx context.Context, tenant string, n int64) error {
	return b.Acquire(ctx, tenant, n)
}

// release gives back n bytes tenant acquired.
func (b *budget) release(tenant string, n int64) { b.Release(tenant, n) }

// ReplyBudget is the budget the server charges its large answers to
// (MaxReplyBytes, shared by TenantShare), for the HTTP API to charge its
// answers to as well.
func (s *Server) ReplyBudget() *membudget.Budget { return s.replies.Budget }
