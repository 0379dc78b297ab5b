package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// Errors of administration.
var (
	ErrTenantExists  = errors.New("tenant exists already")
	ErrNoTenant      = errors.New("no such tenant")
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
	ID        string     `json:"key_id"`
	TenantID  string     `json:"tenant_id"`
	Role      Role       `json:"role"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// CreateTenant creates a tenant, recording actor in the audit log.
func (k *Keys) CreateTenant(ctx context.Context, actor, id, name string) (Tenant, error) {
	var t Tenant
	err := k.audited(ctx, func(q *db.Queries) (a audit, err error) {
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
func createTenant(ctx context.Context, q *db.Queries, actor, id, name string) (Tenant, audit, error) {
	if !tenantName.MatchString(id) {
		return Tenant{}, audit{}, ErrBadTenantName
	}
	row, err := q.CreateTenant(ctx, db.CreateTenantParams{TenantID: id, Name: name})
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
func existing(ctx context.Context, q *db.Queries, id string) error {
	if _, err := q.DeletedTenant(ctx, id); err == nil {
		return ErrTenantDeleted
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	return ErrTenantExists
}

// ListTenants lists every live tenant with its count of live keys.
func (k *Keys) ListTenants(ctx context.Context) ([]Tenant, error) {
	rows, err := k.admin.ListTenantsFull(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	out := make([]Tenant, len(rows))
	for i, r := range rows {
		out[i] = Tenant{ID: r.TenantID, Name: r.Name, CreatedAt: r.CreatedAt, LiveKeys: r.LiveKeys}
	}
	return out, nil
}

// CreateKey creates a key of role for tenant, valid until expires (nil:
// until revoked), and returns it with its secret, which is shown this
// once: only its hash is kept.
func (k *Keys) CreateKey(ctx context.Context, actor, tenant string, role Role, expires *time.Time) (Key, string, error) {
	if _, err := ParseRole(string(role)); err != nil {
		return Key{}, "", err
	}
	if expires != nil && !expires.After(k.now()) {
		return Key{}, "", fmt.Errorf("create key for tenant %q: %w", tenant, ErrBadExpiry)
	}
	id, secret, hash := newSecret()
	err := k.audited(ctx, func(q *db.Queries) (audit, error) {
		// Locked: a deletion waits for the key, or the key for it (and
		// then finds no tenant).
		if _, err := q.LockLiveTenant(ctx, tenant); errors.Is(err, pgx.ErrNoRows) {
			return audit{}, ErrNoTenant
		} else if err != nil {
			return audit{}, err
		}
		err := q.CreateKey(ctx, db.CreateKeyParams{KeyID: id, TenantID: tenant, Role: string(role), SecretHash: hash[:], ExpiresAt: timestamptz(expires)})
		return audit{actor: actor, action: "key.create", tenant: tenant, target: id, detail: map[string]any{"role": role, "expires_at": expires}}, err
	})
	if err != nil {
		return Key{}, "", fmt.Errorf("create key for tenant %q: %w", tenant, err)
	}
	return Key{ID: id, TenantID: tenant, Role: role, CreatedAt: k.now().UTC(), ExpiresAt: expires}, secret, nil
}

// ListKeys lists the keys of tenant, or of every tenant when tenant is "".
func (k *Keys) ListKeys(ctx context.Context, tenant string) ([]Key, error) {
	rows, err := k.admin.ListKeys(ctx, pgtype.Text{String: tenant, Valid: tenant != ""})
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	out := make([]Key, len(rows))
	for i, r := range rows {
		out[i] = Key{ID: r.KeyID, TenantID: r.TenantID, Role: Role(r.Role), CreatedAt: r.CreatedAt,
			ExpiresAt: timePtr(r.ExpiresAt), RevokedAt: timePtr(r.RevokedAt)}
	}
	return out, nil
}

// RevokeKey revokes a key at once: every server refuses it from the next
// request and closes its binary sessions (they LISTEN for the
// notification sent in the same transaction).
func (k *Keys) RevokeKey(ctx context.Context, actor, keyID string) (Key, error) {
	var key Key
	err := k.audited(ctx, func(q *db.Queries) (audit, error) {
		row, err := q.RevokeKey(ctx, keyID)
		if errors.Is(err, pgx.ErrNoRows) {
			return audit{}, ErrNoKey
		}
		if err != nil {
			return audit{}, err
		}
		key = Key{ID: row.KeyID, TenantID: row.TenantID}
		if err := q.NotifyKeysChanged(ctx, keyID); err != nil {
			return audit{}, err
		}
		return audit{actor: actor, action: "key.revoke", tenant: row.TenantID, target: keyID}, nil
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
func (k *Keys) audited(ctx context.Context, change func(q *db.Queries) (audit, error)) error {
	return k.auditedTx(ctx, func(_ pgx.Tx, q *db.Queries) ([]audit, error) {
		a, err := change(q)
		return []audit{a}, err
	})
}

// auditedTx is audited for a change of several records, or one that needs
// the transaction itself (dynamic SQL).
func (k *Keys) auditedTx(ctx context.Context, change func(tx pgx.Tx, q *db.Queries) ([]audit, error)) error {
	return k.inAuditedTx(ctx, func(tx pgx.Tx) *db.Queries { return db.New(pgrole.As(tx, pgrole.Admin, "")) }, change)
}

// ownerAuditedTx is auditedTx as the session's own role, which must be
// the schema's owner with the right to make roles (a superuser, as in
// the embedded cluster): for the SQL roles of analysts, whose DDL no path
// role may run. Keys over a pool of pgrole.Server cannot.
func (k *Keys) ownerAuditedTx(ctx context.Context, change func(tx pgx.Tx, q *db.Queries) ([]audit, error)) error {
	return k.inAuditedTx(ctx, func(tx pgx.Tx) *db.Queries { return db.New(tx) }, change)
}

// owner returns the queries of the session's own role (see
// ownerAuditedTx).
func (k *Keys) owner() *db.Queries { return db.New(k.pool) }

func (k *Keys) inAuditedTx(ctx context.Context, queries func(pgx.Tx) *db.Queries, change func(tx pgx.Tx, q *db.Queries) ([]audit, error)) error {
	return pgx.BeginFunc(ctx, k.pool, func(tx pgx.Tx) error {
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
func (a audit) params() db.AddAuditParams {
	detail, err := json.Marshal(a.detail)
	if err != nil || a.detail == nil {
		detail = []byte("{}")
	}
	return db.AddAuditParams{
		Actor: a.actor, Action: a.action, TenantID: pgtype.Text{String: a.tenant, Valid: a.tenant != ""},
		Target: a.target, Detail: detail,
	}
}

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
func (k *Keys) Audit(ctx context.Context, tenant string, max int) ([]AuditEntry, error) {
	rows, err := k.admin.ListAudit(ctx, db.ListAuditParams{TenantID: pgtype.Text{String: tenant, Valid: tenant != ""}, MaxRows: int32(max)})
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
func (k *Keys) SetRate(ctx context.Context, actor, tenant string, r Rate) error {
	if r.PerSec < 0 || r.Burst < 0 || (r.PerSec == 0) != (r.Burst == 0) {
		return fmt.Errorf("set rate of tenant %q: %w", tenant, ErrBadRate)
	}
	err := k.audited(ctx, func(q *db.Queries) (audit, error) {
		_, err := q.SetTenantRate(ctx, db.SetTenantRateParams{
			TenantID:   tenant,
			RatePerSec: pgtype.Float8{Float64: r.PerSec, Valid: r.PerSec > 0},
			RateBurst:  pgtype.Int4{Int32: int32(r.Burst), Valid: r.Burst > 0},
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return audit{}, ErrNoTenant
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
func (k *Keys) TenantRate(ctx context.Context, tenant string) (Rate, error) {
	row, err := k.lookup.GetTenantRate(ctx, tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return Rate{}, ErrNoTenant
	}
	if err != nil {
		return Rate{}, unavailable(tenant, err)
	}
	return Rate{PerSec: row.RatePerSec.Float64, Burst: int(row.RateBurst.Int32)}, nil
}
