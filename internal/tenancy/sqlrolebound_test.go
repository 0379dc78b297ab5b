package tenancy

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/pgerr"
	"github.com/cardboxhq/cardbox/internal/pgfreeze"
	"github.com/cardboxhq/cardbox/internal/tenancy/internal/tenancydb"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// The DDL of analysts' SQL roles (CREATE ROLE, ALTER ROLE, GRANT, DROP
// ROLE) and the transactions around it are bounded: with Postgres
// frozen each change fails as unavailable within the bound, changing
// nothing, and once Postgres answers the same change goes through, once
// in the audit log.
func TestSQLRoleDDLIsBounded(t *testing.T) {
	ctx := context.Background()
	cluster := pgfreeze.NewCluster(t)
	pool, err := pgxpool.New(ctx, cluster.NewDB(t, "sqlroles"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	const bound = 300 * time.Millisecond
	const limit = bound + 1500*time.Millisecond
	adm := New(pool, nil).Bound(bound)
	mustTenant(t, adm, "acme")
	role := SQLRoleName("acme")
	bravoRole := SQLRoleName("bravo")

	for _, c := range []struct {
		name   string
		change func(ctx context.Context) error
		// tenant and action of the change's audit record; role and
		// exists what it leaves in Postgres.
		tenant, action, role string
		exists               bool
	}{
		{"create", func(ctx context.Context) error { _, _, err := adm.CreateSQLRole(ctx, "test", "acme", ""); return err },
			"acme", "sqlrole.create", role, true},
		{"rotate", func(ctx context.Context) error { _, _, err := adm.CreateSQLRole(ctx, "test", "acme", ""); return err },
			"acme", "sqlrole.rotate", role, true},
		{"drop", func(ctx context.Context) error { _, err := adm.DropSQLRoles(ctx, "test", "acme", ""); return err },
			"acme", "sqlrole.drop", role, false},
		{"create a tenant with one", func(ctx context.Context) error {
			_, _, _, err := adm.CreateTenantWithSQLRole(ctx, "test", "bravo", "")
			return err
		}, "bravo", "sqlrole.create", bravoRole, true},
	} {
		audited := func() int { return countAudit(t, adm, c.tenant, c.action) }
		before := audited()
		frozen := pgfreeze.Freeze(t, cluster.PGData())
		// Longer than limit, so that an unbounded change fails the test
		// rather than hang it.
		callCtx, cancel := context.WithTimeout(ctx, limit+2*time.Second)
		start := time.Now()
		err := c.change(callCtx)
		took := time.Since(start)
		cancel()
		frozen.Thaw()
		if !pgerr.Unavailable(err) || took > limit {
			t.Fatalf("%s with Postgres frozen: %v after %v; want an unavailable error within %v", c.name, err, took, limit)
		}
		waitfor.True(t, "Postgres answers after the thaw", 10*time.Second, func() bool { return pool.Ping(ctx) == nil })
		if n := audited(); n != before {
			t.Fatalf("%s cut short: %d %s records, before %d", c.name, n, c.action, before)
		}
		if err := c.change(ctx); err != nil {
			t.Fatalf("%s once Postgres answers: %v", c.name, err)
		}
		if n := audited(); n != before+1 {
			t.Errorf("%s: %d %s records, before %d; want one more", c.name, n, c.action, before)
		}
		if exists, err := tenancydb.New(pool).PGRoleExists(ctx, c.role); err != nil || exists != c.exists {
			t.Errorf("%s: role %s exists: %v (%v); want %v", c.name, c.role, exists, err, c.exists)
		}
	}
}

// countAudit counts the audit log's records of action on tenant.
func countAudit(t *testing.T, adm *Admin, tenant, action string) int {
	t.Helper()
	entries, err := adm.Audit(context.Background(), tenant, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Action == action {
			n++
		}
	}
	return n
}
