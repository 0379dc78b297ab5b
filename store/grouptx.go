package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/sqlc/db"
)

// groupTx is a group's open transaction: BEGIN and the group's statement
// have run, COMMIT waits until the group's files are durable.
type groupTx struct {
	conn *pgxpool.Conn
}

// groupTimeout bounds each round trip of a group's transaction.
const groupTimeout = 30 * time.Second

// beginGroup sends BEGIN and the group's statement in one round trip.
func (e *Engine) beginGroup(params db.CommitAppendBatchParams) (*groupTx, error) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// The query text and arguments come from sqlc; batchQueue only queues.
	if err := db.New(batchQueue{b}).CommitAppendBatch(ctx, params); err != nil {
		conn.Release()
		return nil, err
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		tx := &groupTx{conn: conn}
		tx.rollback()
		return nil, err
	}
	return &groupTx{conn: conn}, nil
}

// commit sends COMMIT and returns the connection to the pool.
func (t *groupTx) commit() error {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	defer t.conn.Release()
	_, err := t.conn.Exec(ctx, "COMMIT")
	return err
}

// rollback abandons the transaction; a nil groupTx is a no-op. A
// connection left inside a transaction is closed by the pool on release.
func (t *groupTx) rollback() {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = t.conn.Exec(ctx, "ROLLBACK")
	t.conn.Release()
}

// batchQueue is a db.DBTX that queues statements on a pgx.Batch instead of
// running them, so a sqlc query can share a round trip with BEGIN.
type batchQueue struct{ b *pgx.Batch }

var errQueueOnly = errors.New("batchQueue only queues statements")

// Exec queues the statement.
func (q batchQueue) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

// Query is not supported: results are read from the batch.
func (q batchQueue) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errQueueOnly
}

// QueryRow is not supported: results are read from the batch.
func (q batchQueue) QueryRow(context.Context, string, ...any) pgx.Row {
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return errQueueOnly }
