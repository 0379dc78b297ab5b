package store

import (
	"context"
	"fmt"
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
)

// ExpiredContext is a live context that a retention policy of its tenant
// expires.
type ExpiredContext struct {
	Tenant    ident.Tenant
	ContextID uint64
}

// ExpiredContexts returns up to max live contexts that their tenants'
// retention policies expire at now: idle (no append) longer than a
// policy's idle time, or older than its maximum age. Contexts of deleted
// tenants are left out.
func (e *Engine) ExpiredContexts(ctx context.Context, now time.Time, max int) ([]ExpiredContext, error) {
	rows, err := e.as(pgrole.Sweeper, "").ListExpiredContexts(ctx, storedb.ListExpiredContextsParams{
		Now: now, MaxContexts: int32(max),
	})
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "list the contexts retention expires")
	}
	out := make([]ExpiredContext, 0, len(rows))
	for _, r := range rows {
		t, err := e.tenants.get(ctx, r.TenantID)
		if fault.KindOf(err) == fault.NotFound {
			continue // deleted meanwhile: its rows go with it
		}
		if err != nil {
			return nil, fmt.Errorf("look up tenant %q: %w", r.TenantID, err)
		}
		out = append(out, ExpiredContext{Tenant: t, ContextID: uint64(r.ContextID)})
	}
	return out, nil
}
