package migrations_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/cardboxhq/cardbox/internal/pgembed"
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

// Every table with row-level security admits its owner (00027), so that
// the SECURITY DEFINER functions, the CLI's statements as the owner and
// later migrations see and write every row under an owner that is not a
// superuser; a migration that forces row-level security on a new table
// must add the policy too.
func TestEveryRowSecurityTableAdmitsItsOwner(t *testing.T) {
	pool := pgtest.NewPool(t)
	rows, err := pool.Query(context.Background(), `
		SELECT c.relname::text
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = current_schema()
		WHERE c.relkind IN ('r', 'p') AND c.relrowsecurity
		  AND NOT EXISTS (SELECT FROM pg_policy p
		                  WHERE p.polrelid = c.oid AND p.polpermissive AND p.polcmd = '*'
		                    AND p.polroles = ARRAY[c.relowner] AND pg_get_expr(p.polqual, p.polrelid) = 'true'
		                    AND pg_get_expr(p.polwithcheck, p.polrelid) = 'true')
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("tables with row-level security and no policy for their owner: %v", missing)
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_policy WHERE polname = 'owner_rows'`).Scan(&n); err != nil || n < 20 {
		t.Fatalf("%d owner_rows policies (%v): the query finds too few", n, err)
	}
}

// An owner without CREATEROLE, on a cluster where cardbox's roles do not
// exist: migrating fails before anything is applied, naming the statements
// a superuser must run (and 00011 itself does, run alone); once they are
// run, every migration applies and the paths work, the analysts' grants
// and policies included.
func TestOwnerWithoutCreateRole(t *testing.T) {
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skip("needs a cluster without cardbox's roles: an embedded one of its own")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "cardbox-dba-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // postgres may run as another user
		t.Fatal(err)
	}
	srv, err := pgembed.Start(ctx, pgembed.Options{Dir: dir, Settings: map[string]string{"fsync": "off"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	super, err := pgxpool.New(ctx, srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close()
	const owner = "dba_made_owner"
	for _, stmt := range []string{
		"CREATE ROLE " + owner + " LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB NOBYPASSRLS",
		"CREATE DATABASE cardbox OWNER " + owner,
	} {
		if _, err := super.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	cfg, err := pgxpool.ParseConfig(srv.URL("cardbox"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User = owner
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	err = migrations.Up(ctx, pool)
	if err == nil {
		t.Fatal("migrated without cardbox's roles and without CREATEROLE")
	}
	for _, want := range []string{"role " + owner + " may not create roles", "CREATE ROLE cardbox_tenant NOLOGIN NOINHERIT;",
		"CREATE ROLE cardbox_analyst NOLOGIN NOINHERIT;", "GRANT cardbox_projector TO cardbox_server;",
		"GRANT cardbox_server TO " + owner + ";", "docs/operations.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q is more than one line", err)
	}
	var applied bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('goose_db_version') IS NOT NULL").Scan(&applied); err != nil || applied {
		t.Fatalf("migrations applied before the check: %v %v", applied, err)
	}

	// goose alone (no check first) stops at 00011, saying the same.
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Up(ctx)
	if err == nil || !strings.Contains(err.Error(), "a superuser must run once: CREATE ROLE cardbox_tenant NOLOGIN NOINHERIT;") {
		t.Fatalf("goose up: %v, want 00011 to name the statements", err)
	}

	for _, stmt := range migrations.RoleStatements(owner) {
		if _, err := super.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := migrations.Up(ctx, pool); err != nil {
		t.Fatalf("migrate after the administrator's statements: %v", err)
	}
	// A card write (the usage trigger's add_cardbox_bytes, as the owner)
	// through the server's path role, and the analysts' setup of 00027.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT set_config('role', 'cardbox_tenant', true), set_config('cardbox.tenant', 'default', true)`)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO cards (tenant_id, card_id, content) VALUES ('default', 'c', '{}')`)
		return err
	})
	if err != nil {
		t.Fatalf("a card written as cardbox_tenant: %v", err)
	}
	var logged int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(bytes), 0) FROM cardbox_usage_log`).Scan(&logged); err != nil || logged == 0 {
		t.Fatalf("usage logged for the card: %d (%v)", logged, err)
	}
	var policies int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_policy WHERE polname LIKE 'analyst%'`).Scan(&policies); err != nil || policies != 28 {
		t.Fatalf("analysts' policies: %d (%v), want 28", policies, err)
	}
}

// docs/operations.md lists the statements a database administrator runs
// for an owner without CREATEROLE: RoleStatements's, for owner cardbox.
func TestRoleStatementsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range migrations.RoleStatements("cardbox") {
		if !strings.Contains(string(doc), "\n"+stmt+"\n") {
			t.Errorf("docs/operations.md does not list %q", stmt)
		}
	}
}
