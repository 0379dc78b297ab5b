package auth

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/auth/internal/authdb"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgbound"
	"github.com/cardboxhq/cardbox/internal/pgrole"
)

// Keys checks API keys against Postgres. Every check reads the key's
// row, so a revocation takes effect on the next request whichever process
// made it; binary sessions, checked once at HELLO, are closed by Watch.
// Keys are made and revoked by package tenancy.
type Keys struct {
	pool *pgxpool.Pool
	// lookup finds keys (pgrole.Lookup).
	lookup *authdb.Queries
	log    *slog.Logger
	now    func() time.Time
}

// NewKeys returns the keys of the database behind pool; log (nil: none)
// hears of Watch's reconnections.
func NewKeys(pool *pgxpool.Pool, log *slog.Logger) *Keys {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Keys{pool: pool, log: log, now: time.Now, lookup: authdb.New(pgrole.As(pool, pgrole.Lookup, ""))}
}

// Bound makes each of k's key lookups (every hosted request asks one) end
// within d, so that a Postgres that does not answer makes them fail as
// unavailable rather than wait. Watch is not bounded: no request waits on
// it. It returns k.
func (k *Keys) Bound(d time.Duration) *Keys {
	k.lookup = authdb.New(pgrole.As(pgbound.Batcher{D: k.pool, Timeout: d}, pgrole.Lookup, ""))
	return k
}

// Authenticate returns the principal of secret. An unknown, malformed,
// revoked or expired key is ErrUnauthenticated, with no word on which
// (that would help a guesser); a database failure is a fault.Error of
// kind Unavailable.
func (k *Keys) Authenticate(ctx context.Context, secret string) (Principal, error) {
	id, ok := KeyIDOf(secret)
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
	if !SecretMatches(secret, row.SecretHash) || row.RevokedAt.Valid || (row.ExpiresAt.Valid && !k.now().Before(row.ExpiresAt.Time)) {
		return Principal{}, ErrUnauthenticated
	}
	return Principal{KeyID: row.KeyID, Tenant: ident.Tenant{ID: row.TenantID.String, No: uint32(row.TenantNo.Int32)}, Role: Role(row.Role)}, nil
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
