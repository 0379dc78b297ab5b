// Package tenancy administers hosted mode's tenants: tenants made, listed
// and deleted (their rows purged in bounded batches), their API keys made
// and revoked, their rates and storage quotas, analysts' SQL roles, and the
// audit log of every change. Checking a key on a request is package auth's.
package tenancy

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/pgbound"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/internal/tenancy/internal/tenancydb"
)

// Admin administers the tenants of the database behind its pool. Every
// change is audited in the transaction that makes it.
type Admin struct {
	pool *pgxpool.Pool
	// lookup reads tenant limits on the request path; admin administers
	// (pgrole).
	lookup, admin *tenancydb.Queries
	// begin starts the audited transactions of changes: the pool, or the
	// pool with each call bounded (Bound).
	begin beginner
	// timeout bounds each call of what runs as the session's own role
	// (analysts' SQL roles, their DDL included) and of a tenant's
	// deletion; 0: unbounded (Bound).
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time
}

// New returns the administration of the database behind pool; log (nil:
// none) hears of what a deletion could not finish.
func New(pool *pgxpool.Pool, log *slog.Logger) *Admin {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Admin{
		pool: pool, log: log, now: time.Now, begin: pool,
		lookup: tenancydb.New(pgrole.As(pool, pgrole.Lookup, "")), admin: tenancydb.New(pgrole.As(pool, pgrole.Admin, "")),
	}
}

// Bound makes each of adm's lookups (tenant rates and quotas: every
// hosted request asks them), each administration statement and each call
// of the audited transactions of changes (tenants and keys made, keys
// revoked, quotas and rates set, tenants deleted, analysts' SQL roles
// made, rotated and dropped, their DDL included) end within d, so that a
// Postgres that does not answer makes them fail as unavailable rather
// than wait. A tenant's rows go in batches of their own, each bounded
// (DeleteTenant). Only PurgeDeleted is not bounded: no request waits on
// it. It returns adm.
func (adm *Admin) Bound(d time.Duration) *Admin {
	b := pgbound.Batcher{D: adm.pool, Timeout: d}
	adm.lookup, adm.admin = tenancydb.New(pgrole.As(b, pgrole.Lookup, "")), tenancydb.New(pgrole.As(b, pgrole.Admin, ""))
	adm.begin = pgbound.DB{Pool: adm.pool, Timeout: d}
	adm.timeout = d
	return adm
}

// bounded is ctx bounded for one call as the session's own role (see
// Bound).
func (adm *Admin) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return pgbound.Context(ctx, adm.timeout)
}

// beginner starts transactions: a pool, or a bounded one.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}
