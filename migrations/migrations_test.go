package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// sqlRoleState is what migration 00012 sets up in a database.
type sqlRoleState struct {
	table, role, grant bool
	policies, rls      int // of the five analysts' tables
}

func readSQLRoleState(t *testing.T, pool *pgxpool.Pool, role string) sqlRoleState {
	t.Helper()
	var s sqlRoleState
	err := pool.QueryRow(context.Background(), `
		SELECT to_regclass('sql_roles') IS NOT NULL,
		       EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1),
		       has_table_privilege('cardbox_analyst', 'turns', 'SELECT'),
		       (SELECT count(*) FROM pg_policy WHERE polname LIKE 'analyst%')::int,
		       (SELECT count(*) FROM pg_class WHERE relrowsecurity
		          AND relname IN ('turns', 'turn_metadata', 'contexts', 'cards', 'boxes'))::int`, role).
		Scan(&s.table, &s.role, &s.grant, &s.policies, &s.rls)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Migrating 00012 down removes what it made in the database (the table,
// functions, grants, policies, row-level security and the analysts' login
// roles it recorded) but keeps the group role; up again restores it.
func TestSQLRolesDownAndUpAgain(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	const role = "cardbox_sql_migrations_test"
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	for _, stmt := range []string{
		"INSERT INTO tenants (tenant_id) VALUES ('acme')",
		"CREATE ROLE " + role + " LOGIN IN ROLE cardbox_analyst",
		"INSERT INTO sql_roles (role_name, tenant_id) VALUES ('" + role + "', 'acme')",
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	// Two policies on each of the five tables of 00012 and the nine of
	// 00016 (the analytics views' tables).
	up := sqlRoleState{table: true, role: true, grant: true, policies: 28, rls: 5}
	if got := readSQLRoleState(t, pool, role); got != up {
		t.Fatalf("after up: %+v, want %+v", got, up)
	}

	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if got := readSQLRoleState(t, pool, role); got != (sqlRoleState{}) {
		t.Fatalf("after down: %+v, want nothing", got)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := readSQLRoleState(t, pool, role), (sqlRoleState{table: true, grant: true, policies: 28, rls: 5}); got != want {
		t.Fatalf("after up again: %+v, want %+v", got, want)
	}
}
