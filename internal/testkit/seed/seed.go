// Package seed makes the tenants and keys a test needs through the real
// administration (internal/tenancy), failing the test when it cannot, so
// that a test's setup reads as what it makes.
package seed

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// Actor is the audit log's actor of everything seed makes.
const Actor = "test"

// Tenants makes the tenants ids, each named after its id.
func Tenants(t testing.TB, admin *tenancy.Admin, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := admin.CreateTenant(context.Background(), Actor, id, ""); err != nil {
			t.Fatalf("create tenant %s: %v", id, err)
		}
	}
}

// Key makes a key of role for tenant, and returns it and its secret.
func Key(t testing.TB, admin *tenancy.Admin, tenant string, role auth.Role) (tenancy.Key, string) {
	t.Helper()
	return ExpiringKey(t, admin, tenant, role, nil)
}

// ExpiringKey is Key with an expiry (nil: none).
func ExpiringKey(t testing.TB, admin *tenancy.Admin, tenant string, role auth.Role, expires *time.Time) (tenancy.Key, string) {
	t.Helper()
	k, secret, err := admin.CreateKey(context.Background(), Actor, tenant, role, expires)
	if err != nil {
		t.Fatalf("create a %s key of %s: %v", role, tenant, err)
	}
	return k, secret
}

// TenantKey makes tenant and a key of role for it, and returns the key's
// secret: the usual start of a test of one tenant's client.
func TenantKey(t testing.TB, admin *tenancy.Admin, tenant string, role auth.Role) string {
	t.Helper()
	Tenants(t, admin, tenant)
	_, secret := Key(t, admin, tenant, role)
	return secret
}

// OperatorKey makes an operator key, and returns it and its secret.
func OperatorKey(t testing.TB, admin *tenancy.Admin) (tenancy.Key, string) {
	t.Helper()
	k, secret, err := admin.CreateOperatorKey(context.Background(), Actor, nil)
	if err != nil {
		t.Fatalf("create an operator key: %v", err)
	}
	return k, secret
}

// Execer runs SQL: a pool, a connection or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// TenantResolver gives a tenant's identity as the turn engine knows it
// (store.Engine does).
type TenantResolver interface {
	Tenant(ctx context.Context, id string) (ident.Tenant, error)
}

// StoreTenant makes sure tenant id's row exists (the default tenant's
// already does), with nothing else administration would make, and
// returns the tenant as engine resolves it: what a test of the turn
// engine or a surface over it needs to append as that tenant.
func StoreTenant(t testing.TB, db Execer, engine TenantResolver, id string) ident.Tenant {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING`, id); err != nil {
		t.Fatalf("insert tenant %s: %v", id, err)
	}
	tenant, err := engine.Tenant(ctx, id)
	if err != nil {
		t.Fatalf("resolve tenant %s: %v", id, err)
	}
	return tenant
}
