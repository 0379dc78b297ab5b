package tenancy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
)

// An operator key belongs to no tenant; every other key belongs to one.
func TestOperatorKeysBelongToNoTenant(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	keys := tenancy.New(pool, nil)
	seed.Tenants(t, keys, "acme")
	key, secret := seed.OperatorKey(t, keys)
	p, err := auth.NewKeys(pool, nil).Authenticate(ctx, secret)
	if err != nil || p.Role != auth.RoleOperator || p.Tenant.ID != "" || p.KeyID != key.ID || key.TenantID != "" {
		t.Fatalf("operator key %+v authenticates as %+v, %v", key, p, err)
	}
	if p.Role.CanRead() || p.Role.CanWrite() || !p.Role.CanAdminister() {
		t.Errorf("operator: read %v, write %v, administer %v; want only administer", p.Role.CanRead(), p.Role.CanWrite(), p.Role.CanAdminister())
	}
	if _, _, err := keys.CreateKey(ctx, "test", "acme", auth.RoleOperator, nil); !errors.Is(err, tenancy.ErrOperatorTenant) {
		t.Errorf("an operator key of tenant acme: %v, want ErrOperatorTenant", err)
	}
	listed, err := keys.ListKeys(ctx, "")
	if err != nil || len(listed) != 1 || listed[0].ID != key.ID || listed[0].Role != auth.RoleOperator {
		t.Errorf("all keys: %+v, %v; want the operator key", listed, err)
	}
	if _, err := keys.ListKeys(ctx, "nobody"); !errors.Is(err, auth.ErrNoTenant) {
		t.Errorf("keys of a tenant that does not exist: %v, want ErrNoTenant", err)
	}
	// Revoked through a tenant's scope it is not found; through the
	// operator's it goes.
	if _, err := keys.RevokeKeyOf(ctx, "test", "acme", key.ID); !errors.Is(err, tenancy.ErrNoKey) {
		t.Errorf("acme revokes the operator key: %v, want ErrNoKey", err)
	}
	if _, err := keys.RevokeKey(ctx, "test", key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.NewKeys(pool, nil).Authenticate(ctx, secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("revoked operator key: %v", err)
	}
}

// A secret file's operator key is made once, kept on later starts, and
// never brought back or taken over.
func TestEnsureOperatorKey(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	keys := tenancy.New(pool, nil)
	seed.Tenants(t, keys, "acme")
	const secret = "cbk_key_00112233445566aa_" + "0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
	for range 2 { // the second start finds it
		if err := keys.EnsureOperatorKey(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := auth.NewKeys(pool, nil).Authenticate(ctx, secret); err != nil || p.Role != auth.RoleOperator {
		t.Fatalf("the secret authenticates as %+v, %v", p, err)
	}
	audit, err := keys.Audit(ctx, "", 10)
	if n := countActions(audit, "key.create"); err != nil || n != 1 {
		t.Errorf("audit: %d key.create records (%v), want 1", n, err)
	}
	_, tenantSecret := seed.Key(t, keys, "acme", auth.RoleAdmin)
	for _, c := range []struct {
		name, secret, want string
	}{
		{"not a key", "hunter2", "not an API key secret"},
		{"another secret of its id", secret[:len(secret)-1] + "H", "another secret"},
		{"a tenant's key", tenantSecret, "role admin, not operator"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := keys.EnsureOperatorKey(ctx, c.secret); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("EnsureOperatorKey: %v, want an error saying %q", err, c.want)
			}
		})
	}
	p, _ := auth.NewKeys(pool, nil).Authenticate(ctx, secret)
	if _, err := keys.RevokeKey(ctx, "test", p.KeyID); err != nil {
		t.Fatal(err)
	}
	if err := keys.EnsureOperatorKey(ctx, secret); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("a revoked operator key's secret: %v, want an error saying it was revoked", err)
	}
	if _, err := auth.NewKeys(pool, nil).Authenticate(ctx, secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("the revoked key came back: %v", err)
	}
}

func countActions(entries []tenancy.AuditEntry, action string) int {
	n := 0
	for _, e := range entries {
		if e.Action == action {
			n++
		}
	}
	return n
}
