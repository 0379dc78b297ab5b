package tenancy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/pgbound"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/internal/tenancy/internal/tenancydb"
)

// Errors of administration.
var (
	ErrTenantExists  = errors.New("tenant exists already")
	ErrNoKey         = errors.New("no such key, or revoked already")
	ErrBadExpiry     = errors.New("a key's expiry must be in the future")
	ErrBadTenantName = errors.New("a tenant name is 1 to 64 characters: letters, digits, '.', '_' or '-', starting with a letter or digit")
)

// tenantName is what a tenant (a CardBox project id) may be called: it
// appears in URLs and Postgres role names.
var tenantName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Tenant is a tenant as administration lists it.
type Tenant struct {
	ID        string    `json:"tenant_id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	LiveKeys  int64     `json:"live_keys"`
}

// Key is a key as administration lists it; never its secret.
type Key struct {
	ID string `json:"key_id"`
	// TenantID is empty for an operator key.
	TenantID  string     `json:"tenant_id,omitempty"`
	Role      auth.Role  `json:"role"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// CreateTenant creates a tenant, recording actor in the audit log.
func (adm *Admin) CreateTenant(ctx context.Context, actor, id, name string) (Tenant, error) {
	var t Tenant
	err := adm.audited(ctx, func(q *tenancydb.Queries) (a audit, err error) {
		t, a, err = createTenant(ctx, q, actor, id, name)
		return a, err
	})
	if err != nil {
		return Tenant{}, fmt.Errorf("create tenant %q: %w", id, err)
	}
	return t, nil
}

// createTenant creates a tenant in q's transaction and returns the record
// of it for the audit log.
func createTenant(ctx context.Context, q *tenancydb.Queries, actor, id, name string) (Tenant, audit, error) {
	if !tenantName.MatchString(id) {
		return Tenant{}, audit{}, ErrBadTenantName
	}
	row, err := q.CreateTenant(ctx, tenancydb.CreateTenantParams{TenantID: id, Name: name})
	if errors.Is(err, pgx.ErrNoRows) {
		return Tenant{}, audit{}, existing(ctx, q, id)
	}
	if err != nil {
		return Tenant{}, audit{}, err
	}
	t := Tenant{ID: row.TenantID, Name: row.Name, CreatedAt: row.CreatedAt}
	return t, audit{actor: actor, action: "tenant.create", tenant: id, target: id}, nil
}

// existing says why tenant id could not be created: it exists, or it
// was deleted.
func existing(ctx context.Context, q *tenancydb.Queries, id string) error {
	if _, err := q.DeletedTenant(ctx, id); err == nil {
		return ErrTenantDeleted
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	return ErrTenantExists
}

// ListTenants lists every live tenant with its count of live keys.
func (adm *Admin) ListTenants(ctx context.Context) ([]Tenant, error) {
	rows, err := adm.admin.ListTenantsFull(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	out := make([]Tenant, len(rows))
	for i, r := range rows {
		out[i] = Tenant{ID: r.TenantID, Name: r.Name, CreatedAt: r.CreatedAt, LiveKeys: r.LiveKeys}
	}
	return out, nil
}

// Errors of key administration.
var (
	// ErrOperatorTenant: an operator key belongs to no tenant, and every
	// other key belongs to one.
	ErrOperatorTenant = errors.New("an operator key belongs to no tenant (create it without one), and every other key belongs to one")
	// ErrBadSecret: a secret that is not in the key format.
	ErrBadSecret = errors.New("not an API key secret (cbk_key_<16 hex digits>_<43 base64url characters>)")
)

// CreateKey creates a key of role for tenant, valid until expires (nil:
// until revoked), and returns it with its secret, which is shown this
// once: only its hash is kept. Operator keys are made by
// CreateOperatorKey.
func (adm *Admin) CreateKey(ctx context.Context, actor, tenant string, role auth.Role, expires *time.Time) (Key, string, error) {
	if _, err := auth.ParseRole(string(role)); err != nil {
		return Key{}, "", err
	}
	if role == auth.RoleOperator {
		return Key{}, "", fmt.Errorf("create key for tenant %q: %w", tenant, ErrOperatorTenant)
	}
	key, secret, err := adm.createKey(ctx, actor, tenant, role, expires)
	if err != nil {
		return Key{}, "", fmt.Errorf("create key for tenant %q: %w", tenant, err)
	}
	return key, secret, nil
}

// CreateOperatorKey creates an operator key, valid until expires (nil:
// until revoked), and returns it with its secret, shown this once.
func (adm *Admin) CreateOperatorKey(ctx context.Context, actor string, expires *time.Time) (Key, string, error) {
	key, secret, err := adm.createKey(ctx, actor, "", auth.RoleOperator, expires)
	if err != nil {
		return Key{}, "", fmt.Errorf("create operator key: %w", err)
	}
	return key, secret, nil
}

// createKey creates a key of role for tenant ("" for an operator key).
func (adm *Admin) createKey(ctx context.Context, actor, tenant string, role auth.Role, expires *time.Time) (Key, string, error) {
	if expires != nil && !expires.After(adm.now()) {
		return Key{}, "", ErrBadExpiry
	}
	id, secret, hash := auth.NewSecret()
	err := adm.audited(ctx, func(q *tenancydb.Queries) (audit, error) {
		if err := insertKey(ctx, q, id, tenant, role, hash[:], expires); err != nil {
			return audit{}, err
		}
		return audit{actor: actor, action: "key.create", tenant: tenant, target: id, detail: map[string]any{"role": role, "expires_at": expires}}, nil
	})
	if err != nil {
		return Key{}, "", err
	}
	return Key{ID: id, TenantID: tenant, Role: role, CreatedAt: adm.now().UTC(), ExpiresAt: expires}, secret, nil
}

// insertKey adds a key's row in q's transaction. A tenant's key locks
// the tenant's row: a deletion waits for the key, or the key for it (and
// then finds no tenant).
func insertKey(ctx context.Context, q *tenancydb.Queries, id, tenant string, role auth.Role, hash []byte, expires *time.Time) error {
	if tenant != "" {
		if _, err := q.LockLiveTenant(ctx, tenant); errors.Is(err, pgx.ErrNoRows) {
			return auth.ErrNoTenant
		} else if err != nil {
			return err
		}
	}
	return q.CreateKey(ctx, tenancydb.CreateKeyParams{KeyID: id, TenantID: optionalText(tenant), Role: string(role), SecretHash: hash, ExpiresAt: timestamptz(expires)})
}

// EnsureOperatorKey makes secret an operator key unless it is one
// already: what a server given a secret file does at start-up, so that a
// container's first operator key needs no CLI. A key of that id that is
// not a live operator key with this secret is an error saying which; a
// revoked key is never brought back.
func (adm *Admin) EnsureOperatorKey(ctx context.Context, secret string) error {
	id, ok := auth.KeyIDOf(secret)
	if !ok {
		return fmt.Errorf("operator key from a secret: %w", ErrBadSecret)
	}
	err := adm.auditedTx(ctx, func(_ pgx.Tx, q *tenancydb.Queries) ([]audit, error) {
		row, err := q.GetKey(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			hash := sha256.Sum256([]byte(secret))
			created := audit{actor: "secret-file", action: "key.create", target: id, detail: map[string]any{"role": auth.RoleOperator}}
			return []audit{created}, insertKey(ctx, q, id, "", auth.RoleOperator, hash[:], nil)
		}
		if err != nil {
			return nil, err
		}
		return nil, adm.liveOperatorKey(row, secret)
	})
	if err != nil {
		return fmt.Errorf("operator key %s from a secret: %w", id, err)
	}
	return nil
}

// liveOperatorKey says why row is not the live operator key of secret.
func (adm *Admin) liveOperatorKey(row tenancydb.GetKeyRow, secret string) error {
	switch {
	case auth.Role(row.Role) != auth.RoleOperator:
		return fmt.Errorf("the key exists with role %s, not operator", row.Role)
	case !auth.SecretMatches(secret, row.SecretHash):
		return errors.New("the key exists with another secret")
	case row.RevokedAt.Valid:
		return errors.New("the key was revoked; put a new secret in the file")
	case row.ExpiresAt.Valid && !adm.now().Before(row.ExpiresAt.Time):
		return errors.New("the key has expired; put a new secret in the file")
	}
	return nil
}

// ListKeys lists the keys of tenant, or of every tenant and the
// operators when tenant is "". A tenant that does not exist is
// auth.ErrNoTenant.
func (adm *Admin) ListKeys(ctx context.Context, tenant string) ([]Key, error) {
	if tenant != "" {
		if _, err := adm.admin.GetTenant(ctx, tenant); errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("list keys of tenant %q: %w", tenant, auth.ErrNoTenant)
		} else if err != nil {
			return nil, fmt.Errorf("list keys of tenant %q: %w", tenant, err)
		}
	}
	rows, err := adm.admin.ListKeys(ctx, optionalText(tenant))
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	out := make([]Key, len(rows))
	for i, r := range rows {
		out[i] = Key{ID: r.KeyID, TenantID: r.TenantID.String, Role: auth.Role(r.Role), CreatedAt: r.CreatedAt,
			ExpiresAt: timePtr(r.ExpiresAt), RevokedAt: timePtr(r.RevokedAt)}
	}
	return out, nil
}

// RevokeKey revokes a key at once: every server refuses it from the next
// request and closes its binary sessions (they LISTEN for the
// notification sent in the same transaction).
func (adm *Admin) RevokeKey(ctx context.Context, actor, keyID string) (Key, error) {
	return adm.RevokeKeyOf(ctx, actor, "", keyID)
}

// RevokeKeyOf is RevokeKey for a key of tenant only ("": of any tenant,
// or an operator's): another's key is ErrNoKey, as a missing one.
func (adm *Admin) RevokeKeyOf(ctx context.Context, actor, tenant, keyID string) (Key, error) {
	var key Key
	err := adm.audited(ctx, func(q *tenancydb.Queries) (audit, error) {
		row, err := q.RevokeKey(ctx, tenancydb.RevokeKeyParams{KeyID: keyID, TenantID: optionalText(tenant)})
		if errors.Is(err, pgx.ErrNoRows) {
			return audit{}, ErrNoKey
		}
		if err != nil {
			return audit{}, err
		}
		key = Key{ID: row.KeyID, TenantID: row.TenantID.String, Role: auth.Role(row.Role), CreatedAt: row.CreatedAt,
			ExpiresAt: timePtr(row.ExpiresAt), RevokedAt: timePtr(row.RevokedAt)}
		if err := q.NotifyKeysChanged(ctx, keyID); err != nil {
			return audit{}, err
		}
		return audit{actor: actor, action: "key.revoke", tenant: key.TenantID, target: keyID}, nil
	})
	if err != nil {
		return Key{}, fmt.Errorf("revoke key %q: %w", keyID, err)
	}
	return key, nil
}

// audit is one audit log record.
type audit struct {
	actor, action, tenant, target string
	detail                        map[string]any
}

// audited runs change in a transaction and records what it returns in the
// audit log in the same transaction: no change without its record.
func (adm *Admin) audited(ctx context.Context, change func(q *tenancydb.Queries) (audit, error)) error {
	return adm.auditedTx(ctx, func(_ pgx.Tx, q *tenancydb.Queries) ([]audit, error) {
		a, err := change(q)
		return []audit{a}, err
	})
}

// auditedTx is audited for a change of several records, or one that needs
// the transaction itself (dynamic SQL).
func (adm *Admin) auditedTx(ctx context.Context, change func(tx pgx.Tx, q *tenancydb.Queries) ([]audit, error)) error {
	return adm.inAuditedTx(ctx, adm.begin, adminQueries, change)
}

// adminQueries are a transaction's queries as the administration role.
func adminQueries(tx pgx.Tx) *tenancydb.Queries {
	return tenancydb.New(pgrole.As(tx, pgrole.Admin, ""))
}

// ownerAuditedTx is auditedTx as the session's own role, which must be
// the schema's owner with the right to make roles (a superuser, as in
// the embedded cluster): for the SQL roles of analysts, whose DDL no path
// role may run. Keys over a pool of pgrole.Server cannot. Each call,
// the DDL included, is bounded as Bound says.
func (adm *Admin) ownerAuditedTx(ctx context.Context, change func(tx pgx.Tx, q *tenancydb.Queries) ([]audit, error)) error {
	return adm.inAuditedTx(ctx, pgbound.DB{Pool: adm.pool, Timeout: adm.timeout}, func(tx pgx.Tx) *tenancydb.Queries { return tenancydb.New(tx) }, change)
}

// owner returns the queries of the session's own role (see
// ownerAuditedTx); callers bound each call (bounded).
func (adm *Admin) owner() *tenancydb.Queries { return tenancydb.New(adm.pool) }

func (adm *Admin) inAuditedTx(ctx context.Context, begin beginner, queries func(pgx.Tx) *tenancydb.Queries, change func(tx pgx.Tx, q *tenancydb.Queries) ([]audit, error)) error {
	return pgx.BeginFunc(ctx, begin, func(tx pgx.Tx) error {
		q := queries(tx)
		records, err := change(tx, q)
		if err != nil {
			return err
		}
		for _, a := range records {
			if err := q.AddAudit(ctx, a.params()); err != nil {
				return err
			}
		}
		return nil
	})
}

// params are the audit log row of a.
func (a audit) params() tenancydb.AddAuditParams {
	detail, err := json.Marshal(a.detail)
	if err != nil || a.detail == nil {
		detail = []byte("{}")
	}
	return tenancydb.AddAuditParams{
		Actor: a.actor, Action: a.action, TenantID: optionalText(a.tenant),
		Target: a.target, Detail: detail,
	}
}

// optionalText is s as a nullable column: NULL when empty.
func optionalText(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

func timestamptz(t *time.Time) pgtype.Timestamptz {
	if t == nil {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: *t, Valid: true}
}

func timePtr(t pgtype.Timestamptz) *time.Time {
	if !t.Valid {
		return nil
	}
	return &t.Time
}

// AuditEntry is one record of the audit log.
type AuditEntry struct {
	ID       int64           `json:"audit_id"`
	At       time.Time       `json:"at"`
	Actor    string          `json:"actor"`
	Action   string          `json:"action"`
	TenantID string          `json:"tenant_id,omitempty"`
	Target   string          `json:"target"`
	Detail   json.RawMessage `json:"detail"`
}

// Audit returns the last max records of the audit log about tenant (all
// tenants when tenant is ""), newest first.
func (adm *Admin) Audit(ctx context.Context, tenant string, max int) ([]AuditEntry, error) {
	rows, err := adm.admin.ListAudit(ctx, tenancydb.ListAuditParams{TenantID: optionalText(tenant), MaxRows: int32(max)})
	if err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	out := make([]AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = AuditEntry{ID: r.AuditID, At: r.At, Actor: r.Actor, Action: r.Action, TenantID: r.TenantID.String, Target: r.Target, Detail: r.Detail}
	}
	return out, nil
}

// Rate is a tenant's request rate limit: requests per second and the
// burst allowed above it. The zero Rate means the server's default.
type Rate struct {
	PerSec float64 `json:"per_sec,omitempty"`
	Burst  int     `json:"burst,omitempty"`
}

// SetRate sets a tenant's rate limit (the zero Rate: back to the
// server's default). Servers apply it within ratelimit.RefreshEvery.
func (adm *Admin) SetRate(ctx context.Context, actor, tenant string, r Rate) error {
	if r.PerSec < 0 || r.Burst < 0 || (r.PerSec == 0) != (r.Burst == 0) {
		return fmt.Errorf("set rate of tenant %q: %w", tenant, ErrBadRate)
	}
	err := adm.audited(ctx, func(q *tenancydb.Queries) (audit, error) {
		_, err := q.SetTenantRate(ctx, tenancydb.SetTenantRateParams{
			TenantID:   tenant,
			RatePerSec: pgtype.Float8{Float64: r.PerSec, Valid: r.PerSec > 0},
			RateBurst:  pgtype.Int4{Int32: int32(r.Burst), Valid: r.Burst > 0},
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return audit{}, auth.ErrNoTenant
		}
		return audit{actor: actor, action: "tenant.rate", tenant: tenant, target: tenant, detail: map[string]any{"per_sec": r.PerSec, "burst": r.Burst}}, err
	})
	if err != nil {
		return fmt.Errorf("set rate of tenant %q: %w", tenant, err)
	}
	return nil
}

// ErrBadRate is a rate that is negative or gives one of rate and burst
// without the other.
var ErrBadRate = errors.New("a rate limit is a positive rate and a positive burst, or neither")

// TenantRate returns a tenant's own rate limit (the zero Rate when it has
// none and takes the server's default).
func (adm *Admin) TenantRate(ctx context.Context, tenant string) (Rate, error) {
	row, err := adm.lookup.GetTenantRate(ctx, tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return Rate{}, auth.ErrNoTenant
	}
	if err != nil {
		return Rate{}, fault.Wrap(fault.Unavailable, err, "look up the rate of tenant %s", tenant)
	}
	return Rate{PerSec: row.RatePerSec.Float64, Burst: int(row.RateBurst.Int32)}, nil
}
