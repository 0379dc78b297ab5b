package pgtest_test

import (
	"context"
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
