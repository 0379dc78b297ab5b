package auth

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/pgbound"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
	"github.com/cardboxhq/cardbox/store"
)

// Keys checks API keys against Postgres and administers tenants and keys.
// Every check reads the key's row, so a revocation takes effect on the
// next request whichever process made it; binary sessions, checked once
// at HELLO, are closed by Watch.
type Keys struct {
	pool *pgxpool.Pool
	// lookup finds keys and tenant limits; admin administers (pgrole).
	lookup, admin *db.Queries
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

// NewKeys returns the keys of the database behind pool; log (nil: none)
// hears of Watch's reconnections.
func NewKeys(pool *pgxpool.Pool, log *slog.Logger) *Keys {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Keys{
		pool: pool, log: log, now: time.Now, begin: pool,
		lookup: db.New(pgrole.As(pool, pgrole.Lookup, "")), admin: db.New(pgrole.As(pool, pgrole.Admin, "")),
	}
}

// Bound makes each of k's lookups (keys, tenant rates and quotas: every
// hosted request asks them), each administration statement and each call
// of the audited transactions of changes (tenants and keys made, keys
// revoked, quotas and rates set, tenants deleted, analysts' SQL roles
// made, rotated and dropped, their DDL included) end within d, so that a
// Postgres that does not answer makes them fail as unavailable rather
// than wait. A tenant's rows go in batches of their own, each bounded
// (DeleteTenant). Only Watch and PurgeDeleted are not bounded: no request
// waits on them. It returns k.
func (k *Keys) Bound(d time.Duration) *Keys {
	b := pgbound.Batcher{D: k.pool, Timeout: d}
	k.lookup, k.admin = db.New(pgrole.As(b, pgrole.Lookup, "")), db.New(pgrole.As(b, pgrole.Admin, ""))
	k.begin = pgbound.DB{Pool: k.pool, Timeout: d}
	k.timeout = d
	return k
}

// bounded is ctx bounded for one call as the session's own role (see
// Bound).
func (k *Keys) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return pgbound.Context(ctx, k.timeout)
}

// beginner starts transactions: a pool, or a bounded one.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Authenticate returns the principal of secret. An unknown, malformed,
// revoked or expired key is ErrUnauthenticated, with no word on which
// (that would help a guesser); a database failure is a fault.Error of
// kind Unavailable.
func (k *Keys) Authenticate(ctx context.Context, secret string) (Principal, error) {
	id, ok := keyIDOf(secret)
	if !ok {
		return Principal{}, ErrUnauthenticated
	}
	row, err := k.lookup.GetKey(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, unavailable(id, err)
	}
	if !matches(secret, row.SecretHash) || row.RevokedAt.Valid || (row.ExpiresAt.Valid && !k.now().Before(row.ExpiresAt.Time)) {
		return Principal{}, ErrUnauthenticated
	}
	return Principal{KeyID: row.KeyID, Tenant: store.Tenant{ID: row.TenantID.String, No: uint32(row.TenantNo.Int32)}, Role: Role(row.Role)}, nil
}

// ValidKey reports whether a key is still valid (it exists, is not
// revoked and not expired): what Watch's callers check for open sessions.
func (k *Keys) ValidKey(ctx context.Context, keyID string) (bool, error) {
	row, err := k.lookup.GetKey(ctx, keyID)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, unavailable(keyID, err)
	}
	return !row.RevokedAt.Valid && (!row.ExpiresAt.Valid || k.now().Before(row.ExpiresAt.Time)), nil
}

// unavailable is a failed key lookup: the surfaces answer 503 (507 when
// Postgres's disk is full), not 401, since the key may well be valid.
func unavailable(keyID string, err error) error {
	return fault.Wrap(fault.Unavailable, err, "look up API key %s", keyID)
}
