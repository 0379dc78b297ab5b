package tenancy

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/tenancy/internal/tenancydb"
)

// ErrBadQuota is a negative quota.
var ErrBadQuota = errors.New("a storage quota is a positive number of bytes, or 0 for the server's default")

// Quota is a tenant's storage quota as Postgres holds it.
type Quota struct {
	// Bytes is the tenant's own quota; 0 takes the server's default
	// (--tenant-quota-bytes).
	Bytes int64 `json:"quota_bytes,omitempty"`
	// CardBoxBytes is what the tenant's cards and boxes hold (the turn
	// store's part of its usage is known to the server only).
	CardBoxBytes int64 `json:"cardbox_bytes"`
}

// SetQuota sets a tenant's storage quota in bytes (0: back to the
// server's default), recording actor in the audit log. Servers apply it
// within quota.RefreshEvery.
func (adm *Admin) SetQuota(ctx context.Context, actor, tenant string, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("set quota of tenant %q: %w", tenant, ErrBadQuota)
	}
	err := adm.audited(ctx, func(q *tenancydb.Queries) (audit, error) {
		_, err := q.SetTenantQuota(ctx, tenancydb.SetTenantQuotaParams{
			TenantID: tenant, QuotaBytes: pgtype.Int8{Int64: bytes, Valid: bytes > 0},
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return audit{}, auth.ErrNoTenant
		}
		return audit{actor: actor, action: "tenant.quota", tenant: tenant, target: tenant, detail: map[string]any{"quota_bytes": bytes}}, err
	})
	if err != nil {
		return fmt.Errorf("set quota of tenant %q: %w", tenant, err)
	}
	return nil
}

// TenantQuota returns a tenant's own quota and CardBox bytes.
func (adm *Admin) TenantQuota(ctx context.Context, tenant string) (Quota, error) {
	row, err := adm.lookup.GetTenantQuota(ctx, tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return Quota{}, auth.ErrNoTenant
	}
	if err != nil {
		return Quota{}, fault.Wrap(fault.Unavailable, err, "look up the quota of tenant %s", tenant)
	}
	return Quota{Bytes: row.QuotaBytes.Int64, CardBoxBytes: row.CardboxBytes}, nil
}

// TenantQuotas returns every tenant's own quota and CardBox bytes, by
// tenant id.
func (adm *Admin) TenantQuotas(ctx context.Context) (map[string]Quota, error) {
	rows, err := adm.admin.ListTenantQuotas(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tenant quotas: %w", err)
	}
	out := make(map[string]Quota, len(rows))
	for _, r := range rows {
		out[r.TenantID] = Quota{Bytes: r.QuotaBytes.Int64, CardBoxBytes: r.CardboxBytes}
	}
	return out, nil
}
