package pgtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/pgtest/internal/pgtestdb"
)

// Querier runs statements: a pool, a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// The helpers below run internal/tenancy's own statements for deleting a
// tenant (generated from its query file into pgtestdb), without its audit
// record, notifications or SQL roles: a test of another package deletes a
// tenant in Postgres as the real deletion does, step by step.

// LockTenantForDeletion runs, in tx, the statements internal/tenancy's
// DeleteTenant begins with: the live tenant's row locked FOR UPDATE, then
// the advisory lock that holds off the analytics projector's batches with
// rows of it. It returns the tenant's number.
func LockTenantForDeletion(t testing.TB, tx pgx.Tx, tenant string) int32 {
	t.Helper()
	ctx := context.Background()
	q := pgtestdb.New(tx)
	no, err := q.LockTenantForDelete(ctx, tenant)
	if err != nil {
		t.Fatalf("lock tenant %q for its deletion: %v", tenant, err)
	}
	if err := q.LockTenantAgainstProjection(ctx, no); err != nil {
		t.Fatalf("hold off the projection of tenant %q: %v", tenant, err)
	}
	return no
}

// MarkTenantDeleted marks tenant deleted on q; its rows stay until
// PurgeDeletedTenant.
func MarkTenantDeleted(t testing.TB, q Querier, tenant string) {
	t.Helper()
	if err := pgtestdb.New(q).MarkTenantDeleted(context.Background(), tenant); err != nil {
		t.Fatalf("mark tenant %q deleted: %v", tenant, err)
	}
}

// PurgeDeletedTenant removes every row of tenant, which must be marked
// deleted, on q, in one statement.
func PurgeDeletedTenant(t testing.TB, q Querier, tenant string) {
	t.Helper()
	if _, err := pgtestdb.New(q).PurgeDeletedTenants(context.Background(), pgtype.Text{String: tenant, Valid: true}); err != nil {
		t.Fatalf("purge the rows of deleted tenant %q: %v", tenant, err)
	}
}

// Deletion is a tenant's deletion held open between its first step and the
// rest, so that a test can race a write against it: Begin runs the first
// statement of internal/tenancy's DeleteTenant (the tenant's row locked FOR
// UPDATE), Finish the ones that mark the tenant deleted and remove its
// rows, then commits.
type Deletion struct {
	tx     pgx.Tx
	q      *pgtestdb.Queries
	tenant string
}

// BeginDeletion begins deleting tenant on pool; the transaction is rolled
// back when the test ends unless Finish committed it.
func BeginDeletion(t testing.TB, pool *pgxpool.Pool, tenant string) *Deletion {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	q := pgtestdb.New(tx)
	if _, err := q.LockTenantForDelete(ctx, tenant); err != nil {
		t.Fatalf("lock tenant %q for its deletion: %v", tenant, err)
	}
	return &Deletion{tx: tx, q: q, tenant: tenant}
}

// Finish marks the tenant deleted, removes its rows and commits.
func (d *Deletion) Finish() error {
	ctx := context.Background()
	if err := d.q.MarkTenantDeleted(ctx, d.tenant); err != nil {
		return fmt.Errorf("mark %q deleted: %w", d.tenant, err)
	}
	if _, err := d.q.PurgeDeletedTenants(ctx, pgtype.Text{String: d.tenant, Valid: true}); err != nil {
		return fmt.Errorf("purge %q's rows: %w", d.tenant, err)
	}
	if err := d.tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit %q's deletion: %w", d.tenant, err)
	}
	return nil
}

// UntilDoneOrWaiting waits until done yields (its value and true) or a
// session of pool's database waits for a lock (false): how a test knows
// that a write it started either ended or queued behind another
// transaction's lock.
func UntilDoneOrWaiting(t testing.TB, pool *pgxpool.Pool, done <-chan error) (error, bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-done:
			return err, true
		default:
		}
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return nil, false
		}
		if time.Now().After(deadline) {
			t.Fatal("the write neither ended nor waited for a lock within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
