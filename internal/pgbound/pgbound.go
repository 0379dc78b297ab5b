// Package pgbound gives every Postgres call a deadline: a stalled Postgres
// (a paused VM, a stopped postmaster, a disk that does not answer) makes a
// request wait at most the bound, then fail as unavailable (503), instead
// of holding the request, and its connection, for as long as the stall
// lasts.
//
// A call's context keeps its own deadline when that is earlier; the bound
// applies per call (statement, batch, BEGIN, COMMIT), so a request of
// several calls may take several bounds when Postgres is slow but
// answering, and fails after one when it does not answer at all.
//
// Only what runs on a request path should be bounded: start-up recovery,
// migrations, LISTEN and background sweeps legitimately take longer.
package pgbound

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultTimeout is the bound of a call when none is configured.
const DefaultTimeout = 5 * time.Second

// Context returns ctx bounded to d from now (ctx's own deadline when it is
// earlier); d <= 0 leaves ctx as it is.
func Context(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// Sender sends batches: a *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn or
// pgx.Tx (the pgrole.Batcher of internal/pgrole).
type Sender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Batcher bounds every batch sent through D: reading its results must end
// within Timeout of sending it. It is a Sender, for pgrole.As.
type Batcher struct {
	D       Sender
	Timeout time.Duration
}

// SendBatch sends b with a bounded context, which closing the results
// releases.
func (b Batcher) SendBatch(ctx context.Context, batch *pgx.Batch) pgx.BatchResults {
	ctx, cancel := Context(ctx, b.Timeout)
	return &results{BatchResults: b.D.SendBatch(ctx, batch), cancel: cancel}
}

// results releases its bounded context when closed.
type results struct {
	pgx.BatchResults
	cancel context.CancelFunc
}

func (r *results) Close() error {
	err := r.BatchResults.Close()
	r.cancel()
	return err
}

// DB is a pool whose batches and transactions are bounded: BEGIN, each
// statement or batch in the transaction, COMMIT and ROLLBACK each end
// within Timeout. It has the methods cardbox.DB asks for.
type DB struct {
	Pool    *pgxpool.Pool
	Timeout time.Duration
}

// SendBatch sends a bounded batch.
func (d DB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return Batcher{D: d.Pool, Timeout: d.Timeout}.SendBatch(ctx, b)
}

// Begin starts a transaction whose calls are bounded.
func (d DB) Begin(ctx context.Context) (pgx.Tx, error) {
	bctx, cancel := Context(ctx, d.Timeout)
	defer cancel()
	tx, err := d.Pool.Begin(bctx)
	if err != nil {
		return nil, err
	}
	return Tx{Tx: tx, Timeout: d.Timeout}, nil
}

// Tx bounds each call of a transaction; what it does not override
// (LargeObjects, Prepare, Conn) is Tx's own.
type Tx struct {
	pgx.Tx
	Timeout time.Duration
}

// Begin starts a bounded savepoint.
func (t Tx) Begin(ctx context.Context) (pgx.Tx, error) {
	bctx, cancel := Context(ctx, t.Timeout)
	defer cancel()
	tx, err := t.Tx.Begin(bctx)
	if err != nil {
		return nil, err
	}
	return Tx{Tx: tx, Timeout: t.Timeout}, nil
}

// Commit commits within the bound. When the bound passes, whether the
// transaction committed is unknown to the caller (the connection is
// closed); a caller that must know asks Postgres afterwards.
func (t Tx) Commit(ctx context.Context) error {
	ctx, cancel := Context(ctx, t.Timeout)
	defer cancel()
	return t.Tx.Commit(ctx)
}

// Rollback rolls back within the bound; when it passes, the connection is
// closed, which rolls the transaction back too.
func (t Tx) Rollback(ctx context.Context) error {
	ctx, cancel := Context(ctx, t.Timeout)
	defer cancel()
	return t.Tx.Rollback(ctx)
}

// SendBatch sends a bounded batch in the transaction.
func (t Tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return Batcher{D: t.Tx, Timeout: t.Timeout}.SendBatch(ctx, b)
}

// Exec runs a bounded statement.
func (t Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	ctx, cancel := Context(ctx, t.Timeout)
	defer cancel()
	return t.Tx.Exec(ctx, sql, args...)
}

// Query runs a bounded statement; the bound covers reading its rows, and
// closing them releases it.
func (t Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	ctx, cancel := Context(ctx, t.Timeout)
	rows, err := t.Tx.Query(ctx, sql, args...)
	if err != nil {
		cancel()
		return nil, err
	}
	return &boundedRows{Rows: rows, cancel: cancel}, nil
}

// QueryRow runs a bounded statement when its row is scanned.
func (t Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return boundedRow{tx: t, ctx: ctx, sql: sql, args: args}
}

// CopyFrom copies within the bound.
func (t Tx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	ctx, cancel := Context(ctx, t.Timeout)
	defer cancel()
	return t.Tx.CopyFrom(ctx, table, columns, src)
}

type boundedRows struct {
	pgx.Rows
	cancel context.CancelFunc
}

func (r *boundedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.cancel()
	return false
}

func (r *boundedRows) Close() {
	r.Rows.Close()
	r.cancel()
}

type boundedRow struct {
	tx   Tx
	ctx  context.Context
	sql  string
	args []any
}

func (r boundedRow) Scan(dest ...any) error {
	ctx, cancel := Context(r.ctx, r.tx.Timeout)
	defer cancel()
	return r.tx.Tx.QueryRow(ctx, r.sql, r.args...).Scan(dest...)
}
