package pgbound_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/internal/pgbound"
	"github.com/cardboxhq/cardbox/internal/pgerr"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const bound = 300 * time.Millisecond

// within fails unless err is an unavailable error that came within the
// bound plus a margin.
func within(t *testing.T, what string, start time.Time, err error) {
	t.Helper()
	took := time.Since(start)
	if err == nil || !pgerr.Unavailable(err) || took > bound+time.Second {
		t.Fatalf("%s: %v after %v; want an unavailable error within %v", what, err, took, bound+time.Second)
	}
}

func TestBatchesEndWithinTheBound(t *testing.T) {
	pool := pgtest.NewPool(t)
	b := pgbound.Batcher{D: pool, Timeout: bound}
	var one int
	batch := &pgx.Batch{}
	batch.Queue("SELECT 1").QueryRow(func(r pgx.Row) error { return r.Scan(&one) })
	if err := b.SendBatch(context.Background(), batch).Close(); err != nil || one != 1 {
		t.Fatalf("a quick batch: %v (%d)", err, one)
	}
	start := time.Now()
	batch = &pgx.Batch{}
	batch.Queue("SELECT pg_sleep(5)")
	within(t, "a batch Postgres does not answer in time", start, b.SendBatch(context.Background(), batch).Close())
	// An earlier deadline of the caller's stays.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	batch = &pgx.Batch{}
	batch.Queue("SELECT pg_sleep(5)")
	err := pgbound.Batcher{D: pool, Timeout: time.Hour}.SendBatch(ctx, batch).Close()
	if took := time.Since(start); err == nil || took > time.Second {
		t.Fatalf("the caller's earlier deadline: %v after %v", err, took)
	}
}

func TestTransactionCallsEndWithinTheBound(t *testing.T) {
	pool := pgtest.NewPool(t)
	d := pgbound.DB{Pool: pool, Timeout: bound}
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(ctx, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Fatalf("QueryRow: %v (%d)", err, n)
	}
	rows, err := tx.Query(ctx, "SELECT generate_series(1, 3)")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		n++
	}
	if rows.Err() != nil || n != 45 {
		t.Fatalf("Query: %v (%d)", rows.Err(), n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	for name, call := range map[string]func(pgx.Tx) error{
		"Exec": func(tx pgx.Tx) error { _, err := tx.Exec(ctx, "SELECT pg_sleep(5)"); return err },
		"QueryRow": func(tx pgx.Tx) error {
			var s string
			return tx.QueryRow(ctx, "SELECT pg_sleep(5)::text").Scan(&s)
		},
		"Query": func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "SELECT pg_sleep(5)")
			if err != nil {
				return err
			}
			for rows.Next() {
			}
			return rows.Err()
		},
		"SendBatch": func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue("SELECT pg_sleep(5)")
			return tx.SendBatch(ctx, b).Close()
		},
	} {
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		within(t, name, start, call(tx))
		start = time.Now()
		_ = tx.Rollback(ctx)
		if took := time.Since(start); took > bound+time.Second {
			t.Fatalf("%s: rollback took %v", name, took)
		}
	}
}
