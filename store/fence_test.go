package store

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// namedPool is a pool on url whose sessions carry application_name name,
// as a cardboxd process's do (see SessionName).
func namedPool(t *testing.T, url, name string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = name
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// openTx begins a transaction on pool that inserts a tenant, standing in
// for a group a process left open when it died.
func openTx(t *testing.T, pool *pgxpool.Pool, tenant string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "INSERT INTO tenants (tenant_id) VALUES ($1)", tenant); err != nil {
		t.Fatal(err)
	}
	return tx
}

func openEngine(t *testing.T, pool *pgxpool.Pool) *Engine {
	t.Helper()
	e, err := Open(context.Background(), Options{Dir: t.TempDir(), Pool: pool})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func tenantExists(t *testing.T, pool *pgxpool.Pool, tenant string) bool {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM tenants WHERE tenant_id = $1", tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func TestRecoveryEndsTheSessionsOfAnEarlierProcess(t *testing.T) {
	url := pgtest.NewDB(t)
	earlier := openTx(t, namedPool(t, url, SessionName()), "zombie")
	pool := namedPool(t, url, SessionName())
	openEngine(t, pool)
	if err := earlier.Commit(context.Background()); err == nil {
		t.Fatal("the earlier process's transaction committed after recovery read the database")
	}
	if tenantExists(t, pool, "zombie") {
		t.Fatal("the earlier process's row exists")
	}
}

func TestRecoveryLeavesOtherSessionsAlone(t *testing.T) {
	tests := []struct {
		name, self, other string
	}{
		{"a session of another application", SessionName(), "psql"},
		{"any session, when this process's sessions are not named", "", SessionName()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := pgtest.NewDB(t)
			other := openTx(t, namedPool(t, url, tt.other), "other")
			pool := namedPool(t, url, tt.self)
			openEngine(t, pool)
			if err := other.Commit(context.Background()); err != nil {
				t.Fatalf("the other session was ended: %v", err)
			}
			if !tenantExists(t, pool, "other") {
				t.Fatal("the other session's row is missing")
			}
		})
	}
}
