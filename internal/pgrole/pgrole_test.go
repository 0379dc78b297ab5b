package pgrole_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// seed gives tenants a and b a context and a card each, written as the
// tables' owner (the test's own connection), and returns the pool.
func seed(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewPool(t)
	_, err := pool.Exec(context.Background(), `
		INSERT INTO tenants (tenant_id) VALUES ('a'), ('b');
		INSERT INTO contexts (tenant_id, context_id) VALUES ('a', 1), ('b', 2);
		INSERT INTO cards (tenant_id, card_id, content) VALUES ('a', 'ca', '{}'), ('b', 'cb', '{}');`)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// tenantsOf runs sql (which must select tenant_id) in s and returns what
// it saw.
func tenantsOf(t *testing.T, s pgrole.Scope, sql string) []string {
	t.Helper()
	rows, err := s.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return got
}

// Queries that leave out the tenant filter see only the scope's tenant.
func TestUnfilteredQueriesSeeOneTenant(t *testing.T) {
	pool := seed(t)
	queries := []string{
		"SELECT tenant_id FROM contexts",
		"SELECT tenant_id FROM cards",
		"SELECT tenant_id FROM tenants WHERE tenant_id <> 'default'",
		"SELECT tenant_id FROM contexts UNION ALL SELECT tenant_id FROM cards",
	}
	for _, tc := range []struct {
		tenant string
		want   string // every row's tenant; "" for no rows
	}{
		{"a", "a"}, {"b", "b"}, {"", ""}, {"nobody", ""},
	} {
		for _, sql := range queries {
			got := tenantsOf(t, pgrole.As(pool, pgrole.Tenant, tc.tenant), sql)
			if tc.want == "" && len(got) > 0 {
				t.Errorf("tenant %q: %s saw %v, want nothing", tc.tenant, sql, got)
			}
			if tc.want != "" && len(got) == 0 {
				t.Errorf("tenant %q: %s saw nothing", tc.tenant, sql)
			}
			for _, g := range got {
				if g != tc.want {
					t.Errorf("tenant %q: %s saw tenant %q's row", tc.tenant, sql, g)
				}
			}
		}
	}
}

// A tenant cannot write rows of another, nor change or delete them.
func TestTenantCannotWriteAnother(t *testing.T) {
	pool := seed(t)
	ctx := context.Background()
	a := pgrole.As(pool, pgrole.Tenant, "a")
	_, err := a.Exec(ctx, "INSERT INTO cards (tenant_id, card_id, content) VALUES ('b', 'x', '{}')")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("insert of b's card as a: err = %v, want 42501 (row-level security)", err)
	}
	for _, sql := range []string{"UPDATE cards SET metadata = '{\"x\":1}'", "DELETE FROM contexts"} {
		tag, err := a.Exec(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if tag.RowsAffected() != 1 {
			t.Errorf("%s as a touched %d rows, want a's 1", sql, tag.RowsAffected())
		}
	}
	var bMeta string
	if err := pool.QueryRow(ctx, "SELECT metadata::text FROM cards WHERE tenant_id = 'b'").Scan(&bMeta); err != nil {
		t.Fatal(err)
	}
	var bContexts int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM contexts WHERE tenant_id = 'b'").Scan(&bContexts); err != nil {
		t.Fatal(err)
	}
	if bMeta != "{}" || bContexts != 1 {
		t.Errorf("b's rows changed: metadata %s, contexts %d", bMeta, bContexts)
	}
}

// The scope ends with its statement: the next statement on the same
// connection runs as the connection's own role, with no tenant.
func TestScopeDoesNotOutliveItsStatement(t *testing.T) {
	pool := seed(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	var sessionUser string
	if err := conn.QueryRow(ctx, "SELECT session_user").Scan(&sessionUser); err != nil {
		t.Fatal(err)
	}
	var role, tenant string
	err = pgrole.As(conn, pgrole.Tenant, "a").QueryRow(ctx,
		"SELECT current_user, current_setting('cardbox.tenant')").Scan(&role, &tenant)
	if err != nil || role != string(pgrole.Tenant) || tenant != "a" {
		t.Fatalf("in scope: role %q tenant %q err %v", role, tenant, err)
	}
	err = conn.QueryRow(ctx, "SELECT current_user, coalesce(current_setting('cardbox.tenant', true), '')").Scan(&role, &tenant)
	if err != nil || role != sessionUser || tenant != "" {
		t.Fatalf("after scope: role %q tenant %q err %v, want %q and no tenant", role, tenant, err, sessionUser)
	}
}

// Each path role may do only what its grants say.
func TestPathGrants(t *testing.T) {
	pool := seed(t)
	super := pgtest.SuperuserPool(t, pool.Config().ConnConfig.Database)
	for _, tc := range []struct {
		role pgrole.Role
		sql  string
		ok   bool
	}{
		{pgrole.Tenant, "SELECT 1 FROM api_keys", false},
		{pgrole.Tenant, "SELECT 1 FROM audit_log", false},
		{pgrole.Tenant, "SELECT 1 FROM turn_log_commits", false},
		{pgrole.Committer, "SELECT content FROM cards", false},
		{pgrole.Committer, "SELECT payload_hash FROM turns", false},
		{pgrole.Committer, "DELETE FROM turns", false},
		{pgrole.Recovery, "SELECT 1 FROM cards", false},
		{pgrole.Recovery, "SELECT tenant_id FROM contexts", true},
		{pgrole.Recovery, "DELETE FROM contexts", false},
		{pgrole.Sweeper, "SELECT 1 FROM contexts", true}, // the reaper of deleted contexts
		{pgrole.Sweeper, "DELETE FROM contexts", false},
		{pgrole.Sweeper, "SELECT 1 FROM api_keys", false},
		{pgrole.Sweeper, "DELETE FROM cards WHERE false", true},
		{pgrole.Lookup, "SELECT 1 FROM api_keys", true},
		{pgrole.Lookup, "SELECT 1 FROM cards", false},
		{pgrole.Admin, "UPDATE cards SET metadata = metadata", false}, // reads and deletes a deleted tenant's, writes none
		{pgrole.Admin, "INSERT INTO audit_log (actor, action) VALUES ('t', 'test')", true},
		{pgrole.Projector, "SELECT turn_id, type_id, uncompressed_len FROM turns", true},
		{pgrole.Projector, "SELECT payload_hash FROM turns", false},
		{pgrole.Projector, "SELECT 1 FROM cards", false},
		{pgrole.Projector, "SELECT 1 FROM contexts", false},
		{pgrole.Projector, "DELETE FROM turn_data", false},
		{pgrole.Projector, "SELECT data FROM turn_data", true},
		{pgrole.Tenant, "SELECT data FROM turn_data", true},
		{pgrole.Tenant, "DELETE FROM turn_data", false},
		{"cardbox_analyst", "SELECT data FROM turn_data", true},
		{"cardbox_analyst", "SELECT 1 FROM api_keys", false},
		{"cardbox_analyst", "INSERT INTO turn_data (tenant_id, turn_id, type_id, type_version, skipped, registry_generation) VALUES ('a', 1, 't', 1, 'too_large', 0)", false},
	} {
		on := pool
		if tc.role == "cardbox_analyst" {
			// No role of the server's is a member of the analysts' group
			// role, nor is the owner: the test server's superuser takes it.
			on = super
		}
		_, err := pgrole.As(on, tc.role, "a").Exec(context.Background(), tc.sql)
		var pgErr *pgconn.PgError
		denied := errors.As(err, &pgErr) && pgErr.Code == "42501"
		if err != nil && !denied {
			t.Errorf("%s: %s: %v", tc.role, tc.sql, err)
		}
		if denied == tc.ok {
			t.Errorf("%s: %s: denied = %v, want %v", tc.role, tc.sql, denied, !tc.ok)
		}
	}
}

// In an explicit transaction too, the statements after a scoped one run
// as the session's role, with no tenant.
func TestScopeInATransactionEndsWithItsStatement(t *testing.T) {
	pool := seed(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var sessionUser, role, tenant string
	if err := tx.QueryRow(ctx, "SELECT session_user").Scan(&sessionUser); err != nil {
		t.Fatal(err)
	}
	if got := tenantsOf(t, pgrole.As(tx, pgrole.Tenant, "b"), "SELECT tenant_id FROM contexts"); len(got) != 1 || got[0] != "b" {
		t.Fatalf("in scope: %v", got)
	}
	err = tx.QueryRow(ctx, "SELECT current_user, coalesce(current_setting('cardbox.tenant', true), '')").Scan(&role, &tenant)
	if err != nil || role != sessionUser || tenant != "" {
		t.Fatalf("after the scoped statement: role %q tenant %q err %v, want %q and no tenant", role, tenant, err, sessionUser)
	}
}

// Every table with a tenant_id column has row-level security, forced,
// and the request role's policy.
func TestEveryTenantTableHasForcedRowSecurity(t *testing.T) {
	pool := pgtest.NewPool(t)
	rows, err := pool.Query(context.Background(), `
		SELECT c.relname::text, c.relrowsecurity, c.relforcerowsecurity,
		       EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'tenant_rows')
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
		WHERE c.relkind = 'r'
		  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var table string
		var on, forced, policy bool
		if err := rows.Scan(&table, &on, &forced, &policy); err != nil {
			t.Fatal(err)
		}
		n++
		// sql_roles is the owner's and administration's alone: no request
		// reads it, so it has no request policy.
		if !on || !forced || (!policy && table != "sql_roles") {
			t.Errorf("%s: row security %v, forced %v, tenant_rows policy %v", table, on, forced, policy)
		}
	}
	if err := rows.Err(); err != nil || n < 20 {
		t.Fatalf("%d tenant tables (%v): the query finds too few", n, err)
	}
}
