package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

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
	// IdleSince is its last append as the lookup saw it, when only being
	// idle expires it: an append since saves it (DeleteExpiredContexts).
	// Zero when its age expires it, which no append changes.
	IdleSince time.Time
}

// DefaultRetention is the server's retention policy for all the contexts
// of every tenant without a policy of its own for all its contexts (the
// empty label): a context idle (no append) longer than Idle, or older
// than MaxAge, is deleted. A zero duration is no limit of that kind; the
// zero DefaultRetention is no default.
type DefaultRetention struct {
	Idle, MaxAge time.Duration
}

// ExpiredContexts returns up to max live contexts that their tenants'
// retention policies, or def for a tenant without a policy for all its
// contexts, expire at now: idle (no append) longer than a policy's idle
// time, or older than its maximum age. Contexts of deleted tenants are
// left out.
func (e *Engine) ExpiredContexts(ctx context.Context, now time.Time, def DefaultRetention, max int) ([]ExpiredContext, error) {
	rows, err := e.as(pgrole.Sweeper, "").ListExpiredContexts(ctx, storedb.ListExpiredContextsParams{
		Now: now, MaxContexts: int32(max),
		DefaultIdleSeconds: seconds(def.Idle), DefaultMaxAgeSeconds: seconds(def.MaxAge),
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
		c := ExpiredContext{Tenant: t, ContextID: uint64(r.ContextID)}
		if !r.ByAge {
			c.IdleSince = r.UpdatedAt
		}
		out = append(out, c)
	}
	return out, nil
}

// seconds is a duration as a policy's column holds it: whole seconds,
// null for none.
func seconds(d time.Duration) pgtype.Int8 {
	return pgtype.Int8{Int64: int64(d / time.Second), Valid: d > 0}
}
