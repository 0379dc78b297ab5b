package pgtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestTxIsRolledBack(t *testing.T) {
	ctx := context.Background()
	t.Run("write", func(t *testing.T) {
		tx := pgtest.Tx(t)
		if _, err := tx.Exec(ctx, `INSERT INTO tenants (tenant_id) VALUES ('pgtest-probe')`); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("gone", func(t *testing.T) {
		var n int
		if err := pgtest.Tx(t).QueryRow(ctx, `SELECT count(*) FROM tenants WHERE tenant_id = 'pgtest-probe'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("row from a rolled-back test is visible: %d", n)
		}
	})
}

func TestNewDBIsMigratedAndIsolated(t *testing.T) {
	ctx := context.Background()
	a, b := pgtest.NewPool(t), pgtest.NewPool(t)
	if _, err := a.Exec(ctx, `INSERT INTO tenants (tenant_id) VALUES ('only-in-a')`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, `SELECT count(*) FROM tenants WHERE tenant_id = 'only-in-a'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("databases are not isolated")
	}
	if err := b.QueryRow(ctx, `SELECT count(*) FROM tenants WHERE tenant_id = 'default'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("default tenant missing: n=%d err=%v", n, err)
	}
}

// The pools, Tx and the URLs log in as the databases' owner, which is an
// ordinary role (unless CARDBOX_TEST_SUPERUSER_OWNER=1): not superuser,
// not BYPASSRLS, CREATEROLE, as a managed Postgres gives cardbox.
func TestDatabasesAreOwnedByAnOrdinaryRole(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.NewPoolAndURL(t)
	var user, dbOwner, tablesOwner string
	var super, bypass, createRole bool
	err := pool.QueryRow(ctx, `
		SELECT current_user, r.rolsuper, r.rolbypassrls, r.rolcreaterole,
		       pg_get_userbyid((SELECT datdba FROM pg_database WHERE datname = current_database())),
		       (SELECT tableowner FROM pg_tables WHERE tablename = 'tenants')
		FROM pg_roles r WHERE r.rolname = current_user`).Scan(&user, &super, &bypass, &createRole, &dbOwner, &tablesOwner)
	if err != nil {
		t.Fatal(err)
	}
	if user != pgtest.Owner() || dbOwner != user || tablesOwner != user {
		t.Fatalf("logged in as %s, the database owned by %s, its tables by %s; want all %s", user, dbOwner, tablesOwner, pgtest.Owner())
	}
	if pgtest.DBName(url) != pool.Config().ConnConfig.Database || (!pgtest.SuperuserOwner() && !strings.Contains(url, "//"+user+":")) {
		t.Errorf("URL %s is not the pool's database as %s", url, user)
	}
	if pgtest.SuperuserOwner() {
		if !super {
			t.Fatalf("%s=1, but %s is not a superuser", pgtest.EnvSuperuserOwner, user)
		}
		return
	}
	if super || bypass || !createRole {
		t.Fatalf("%s: superuser %v, bypassrls %v, createrole %v; want an ordinary owner with CREATEROLE", user, super, bypass, createRole)
	}
	var superSuper bool
	if err := pgtest.SuperuserPool(t, pgtest.DBName(url)).QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&superSuper); err != nil || !superSuper {
		t.Fatalf("SuperuserPool is not a superuser's (%v)", err)
	}
}
