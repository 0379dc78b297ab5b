package migrations_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// tenantTable is what row-level security a tenant table has: the system
// path roles that work across tenants, the roles that read every tenant's
// rows, and whether analysts read their own tenant's rows.
type tenantTable struct {
	systems  []string
	readers  []string
	analysts bool
}

var (
	systemPaths = []string{"cardbox_admin", "cardbox_committer", "cardbox_lookup", "cardbox_recovery", "cardbox_sweeper"}
	projector   = append(slices.Clone(systemPaths), "cardbox_projector")
)

// tenantTables is every table with a tenant_id column, and its policies'
// roles. A new tenant table must be added here and protected by
// cardbox_protect_tenant_table (00028).
var tenantTables = map[string]tenantTable{
	"analytics_backfills":      {systems: projector},
	"analytics_children":       {systems: projector, analysts: true},
	"analytics_context_turns":  {systems: projector, analysts: true},
	"analytics_daily":          {systems: projector, analysts: true},
	"analytics_keyed":          {systems: projector, analysts: true},
	"analytics_tool_call_rows": {systems: projector, analysts: true},
	"analytics_usage":          {systems: projector, analysts: true},
	"analytics_watermarks":     {systems: projector},
	"api_keys":                 {systems: systemPaths},
	"audit_log":                {systems: systemPaths},
	"box_snapshots":            {systems: systemPaths},
	"blob_claim_reviews":       {systems: systemPaths},
	"blob_puts":                {systems: systemPaths},
	"boxes":                    {systems: systemPaths, analysts: true},
	"cardbox_usage_log":        {systems: systemPaths},
	"cards":                    {systems: systemPaths, analysts: true},
	"contexts":                 {systems: systemPaths, analysts: true},
	"dead_turns":               {systems: systemPaths},
	"fs_attachments":           {systems: systemPaths},
	"idempotency_keys":         {systems: systemPaths, analysts: true},
	"registry_bundles":         {systems: systemPaths},
	"released_blob_claims":     {systems: systemPaths},
	"retention_policies":       {systems: systemPaths},
	"tenant_blobs":             {systems: systemPaths},
	"tenant_usage":             {systems: systemPaths},
	"tenants":                  {systems: systemPaths, readers: []string{"cardbox_projector"}, analysts: true},
	"turn_data":                {systems: projector, analysts: true},
	"turn_metadata":            {systems: systemPaths, analysts: true},
	"turn_types":               {systems: systemPaths},
	"turns":                    {systems: systemPaths, readers: []string{"cardbox_projector"}, analysts: true},
}

// notTenantTables have a tenant_id column but are no tenant's data: the
// analysts' login roles, administered by cardbox_admin alone.
var notTenantTables = map[string][]string{
	"sql_roles": {"owner_rows * [OWNER] USING true CHECK true", "system_paths * [cardbox_admin] USING true CHECK true"},
}

// policies describes t's policies as tablePolicies reads them.
func (t tenantTable) policies() []string {
	const own = "(tenant_id = current_setting('cardbox.tenant'::text, true))"
	const analyst = "(tenant_id = cardbox_sql_tenant())"
	systems := slices.Sorted(slices.Values(t.systems))
	p := []string{
		"owner_rows * [OWNER] USING true CHECK true",
		"system_paths * [" + strings.Join(systems, ",") + "] USING true CHECK true",
		"tenant_rows * [cardbox_tenant] USING " + own + " CHECK " + own,
	}
	if len(t.readers) > 0 {
		p = append(p, "system_reads r ["+strings.Join(t.readers, ",")+"] USING true CHECK ")
	}
	if t.analysts {
		p = append(p, "analyst_own_tenant r RESTRICTIVE [cardbox_analyst] USING "+analyst+" CHECK ",
			"analyst_read r [cardbox_analyst] USING "+analyst+" CHECK ")
	}
	slices.Sort(p)
	return p
}

// tablePolicies reads, for every table of the schema with a tenant_id
// column, whether row-level security is enabled and forced, and its
// policies as "name cmd [RESTRICTIVE] [roles] USING expr CHECK expr", the
// table owner's name written OWNER.
func tablePolicies(t *testing.T, conn interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) map[string][]string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
		SELECT c.relname::text, c.relrowsecurity AND c.relforcerowsecurity,
		       coalesce(array_agg(
		         p.polname || ' ' || p.polcmd::text || CASE WHEN p.polpermissive THEN '' ELSE ' RESTRICTIVE' END || ' [' ||
		         (SELECT string_agg(CASE WHEN r = c.relowner THEN 'OWNER' ELSE pg_get_userbyid(r) END, ','
		                            ORDER BY pg_get_userbyid(r)) FROM unnest(p.polroles) r) || '] USING ' || coalesce(pg_get_expr(p.polqual, p.polrelid), '') ||
		         ' CHECK ' || coalesce(pg_get_expr(p.polwithcheck, p.polrelid), '')
		         ORDER BY p.polname) FILTER (WHERE p.polname IS NOT NULL), '{}')
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
		LEFT JOIN pg_policy p ON p.polrelid = c.oid
		WHERE c.relkind IN ('r', 'p')
		  AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
		GROUP BY c.oid, c.relname, c.relrowsecurity, c.relforcerowsecurity`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for rows.Next() {
		var table string
		var forced bool
		var policies []string
		if err := rows.Scan(&table, &forced, &policies); err != nil {
			t.Fatal(err)
		}
		if !forced {
			policies = append([]string{"row-level security not enabled and forced"}, policies...)
		}
		got[table] = policies
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// Every tenant table has exactly the row-level security its entry in
// tenantTables says, made by cardbox_protect_tenant_table; a table with a
// tenant_id column that is in neither list fails, so a new tenant table
// cannot be left unprotected.
func TestTenantTablePolicies(t *testing.T) {
	got := tablePolicies(t, pgtest.NewPool(t))
	for table, policies := range got {
		want, ok := notTenantTables[table]
		if tt, tenant := tenantTables[table]; tenant {
			want, ok = tt.policies(), true
		}
		if !ok {
			t.Errorf("table %s has a tenant_id column but is not listed: protect it with cardbox_protect_tenant_table and list it in tenantTables", table)
			continue
		}
		if !slices.Equal(policies, want) {
			t.Errorf("table %s:\n got  %s\n want %s", table, strings.Join(policies, "\n      "), strings.Join(want, "\n      "))
		}
	}
	for table := range tenantTables {
		if _, ok := got[table]; !ok {
			t.Errorf("listed table %s does not exist", table)
		}
	}
}

// cardbox_protect_tenant_table gives a new table the policies a tenant
// table has, and applied twice changes nothing.
func TestProtectTenantTable(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	for _, stmt := range []string{
		`CREATE TABLE widgets (tenant_id text NOT NULL, name text)`,
		`SELECT cardbox_protect_tenant_table('widgets', ARRAY['cardbox_sweeper', 'cardbox_admin'], ARRAY['cardbox_projector'])`,
		`SELECT cardbox_protect_tenant_table('widgets', ARRAY['cardbox_sweeper', 'cardbox_admin'], ARRAY['cardbox_projector'])`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	want := tenantTable{systems: []string{"cardbox_admin", "cardbox_sweeper"}, readers: []string{"cardbox_projector"}}.policies()
	if got := tablePolicies(t, pool)["widgets"]; !slices.Equal(got, want) {
		t.Fatalf("widgets:\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	// And it does what it says: one tenant's rows for the request role.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, stmt := range []string{
		`INSERT INTO widgets VALUES ('acme', 'a'), ('beta', 'b')`,
		`GRANT SELECT ON widgets TO cardbox_tenant`,
		`SET LOCAL ROLE cardbox_tenant`,
		`SELECT set_config('cardbox.tenant', 'acme', true)`,
	} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	var names []string
	rows, err := tx.Query(ctx, `SELECT name FROM widgets ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || fmt.Sprint(names) != "[a]" {
		t.Fatalf("acme's request role reads %v (%v), want [a]", names, err)
	}
}
