package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// groupTx is a group's open transaction: BEGIN and the group's statement
// were sent, COMMIT waits until the group's files are durable.
type groupTx struct {
	conn    *pgxpool.Conn
	results pgx.BatchResults // of BEGIN and the statement, until awaited
	cancel  context.CancelFunc
}

// groupTimeout bounds each round trip of a group's transaction.
const groupTimeout = 30 * time.Second

// sendGroup sends BEGIN and the group's statement in one round trip and
// returns without waiting for Postgres, which runs the statement while the
// caller writes the group's files; await collects the outcome.
func (e *Engine) sendGroup(params db.CommitAppendBatchParams) (*groupTx, error) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// The group writes many tenants' rows: it runs as the committer, whose
	// grants are the statement's inserts and updates (docs/security.md).
	pgrole.Queue(b, pgrole.Committer, "")
	// The query text and arguments come from sqlc; batchQueue only queues.
	if err := queueGroup(ctx, db.New(batchQueue{b}), params); err != nil {
		cancel()
		conn.Release()
		return nil, err
	}
	return &groupTx{conn: conn, results: conn.SendBatch(ctx, b), cancel: cancel}, nil
}

// queueGroup queues the group's statement: CommitPlainAppends when the
// group needs nothing more, else CommitAppendBatch.
func queueGroup(ctx context.Context, q *db.Queries, a db.CommitAppendBatchParams) error {
	if len(a.TypeTenantIds) > 0 || len(a.KeyTenantIds) > 0 || len(a.FsTenantIds) > 0 || a.PruneBelow != 0 {
		return q.CommitAppendBatch(ctx, a)
	}
	return q.CommitPlainAppends(ctx, db.CommitPlainAppendsParams{
		StoreID: a.StoreID, CommittedEnd: a.CommittedEnd, NextTurnID: a.NextTurnID, PackEnd: a.PackEnd,
		TenantIds: a.TenantIds, TurnIds: a.TurnIds, ContextIds: a.ContextIds,
		ParentTurnIds: a.ParentTurnIds, Depths: a.Depths, TurnTypeIds: a.TurnTypeIds,
		TypeVersions: a.TypeVersions, Encodings: a.Encodings, Compressions: a.Compressions,
		UncompressedLens: a.UncompressedLens, PayloadHashes: a.PayloadHashes, CreatedAts: a.CreatedAts,
		HeadTenantIds: a.HeadTenantIds, HeadContextIds: a.HeadContextIds,
		HeadTurnIds: a.HeadTurnIds, HeadDepths: a.HeadDepths,
		GrantTenantIds: a.GrantTenantIds, GrantHashes: a.GrantHashes,
	})
}

// await waits for BEGIN and the statement; on failure the transaction is
// rolled back and the groupTx must not be used again.
func (t *groupTx) await() error {
	err := t.results.Close()
	t.cancel()
	if err != nil {
		t.rollback()
	}
	return err
}

// commit commits the transaction and returns the connection to the pool.
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
