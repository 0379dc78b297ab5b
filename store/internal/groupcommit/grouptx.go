package groupcommit

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
)

// groupTx is a group's open transaction: BEGIN and the group's statement
// were sent, COMMIT waits until the group's files are durable.
type groupTx struct {
	conn    *pgxpool.Conn
	results pgx.BatchResults // of BEGIN and the statement, until awaited
	cancel  context.CancelFunc
}

// sendGroup sends BEGIN and the group's statement in one round trip and
// returns without waiting for Postgres, which runs the statement while the
// caller writes the group's files; await collects the outcome. Taking a
// connection and the statement's answer must come by deadline, else the
// statement fails (the connection is closed, which ends the transaction:
// its COMMIT was never sent).
func (c *Committer) sendGroup(params storedb.CommitAppendBatchParams, deadline time.Time) (*groupTx, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	conn, err := c.cfg.Pool.Acquire(ctx)
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
	if err := queueGroup(ctx, storedb.New(batchQueue{b}), params); err != nil {
		cancel()
		conn.Release()
		return nil, err
	}
	return &groupTx{conn: conn, results: conn.SendBatch(ctx, b), cancel: cancel}, nil
}

// queueGroup queues the group's statement: CommitPlainAppends when the
// group needs nothing more, CommitKeyedAppends when it needs idempotency
// keys only, else CommitAppendBatch.
func queueGroup(ctx context.Context, q *storedb.Queries, a storedb.CommitAppendBatchParams) error {
	if len(a.TypeTenantIds) > 0 || len(a.FsTenantIds) > 0 || a.PruneBelow != 0 {
		return q.CommitAppendBatch(ctx, a)
	}
	if len(a.KeyTenantIds) > 0 {
		return q.CommitKeyedAppends(ctx, storedb.CommitKeyedAppendsParams{
			StoreID: a.StoreID, CommittedEnd: a.CommittedEnd, NextTurnID: a.NextTurnID, PackEnd: a.PackEnd,
			TenantIds: a.TenantIds, TurnIds: a.TurnIds, ContextIds: a.ContextIds,
			ParentTurnIds: a.ParentTurnIds, Depths: a.Depths, TurnTypeIds: a.TurnTypeIds,
			TypeVersions: a.TypeVersions, Encodings: a.Encodings, Compressions: a.Compressions,
			UncompressedLens: a.UncompressedLens, PayloadHashes: a.PayloadHashes,
			IdempotencyKeys: a.IdempotencyKeys, CreatedAts: a.CreatedAts,
			HeadTenantIds: a.HeadTenantIds, HeadContextIds: a.HeadContextIds,
			HeadTurnIds: a.HeadTurnIds, HeadDepths: a.HeadDepths,
			KeyTenantIds: a.KeyTenantIds, KeyContextIds: a.KeyContextIds, KeyValues: a.KeyValues,
			KeyTurnIds: a.KeyTurnIds, KeyCreatedAts: a.KeyCreatedAts, KeyRequestedParents: a.KeyRequestedParents,
			GrantTenantIds: a.GrantTenantIds, GrantHashes: a.GrantHashes,
		})
	}
	return q.CommitPlainAppends(ctx, storedb.CommitPlainAppendsParams{
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
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			t.rollback() // Postgres answered: the connection is usable
		} else {
			t.abandon()
		}
	}
	return err
}

// pid is the process id of the transaction's Postgres session.
func (t *groupTx) pid() uint32 { return t.conn.Conn().PgConn().PID() }

// commit commits the transaction, which must be answered by deadline, and
// returns the connection to the pool. When the deadline passes first the
// connection is closed and whether the COMMIT took effect is unknown: it
// may still sit unread in the session's socket (see unknownOutcome).
func (t *groupTx) commit(deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	defer t.conn.Release()
	_, err := t.conn.Exec(ctx, "COMMIT")
	return err
}

// rollbackTimeout bounds a ROLLBACK on a connection Postgres just
// answered; when it passes, the connection is closed, which ends the
// transaction as well.
const rollbackTimeout = time.Second

// rollback rolls the transaction back on a connection Postgres just
// answered, which keeps the connection for the pool; a nil groupTx is a
// no-op.
func (t *groupTx) rollback() {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
	defer cancel()
	_, _ = t.conn.Exec(ctx, "ROLLBACK")
	t.conn.Release() // the pool closes a connection still in a transaction
}

// abandon ends the transaction without waiting for Postgres, which may not
// be answering: it closes the connection (the session's transaction ends
// with it, uncommitted, since its COMMIT was never sent) and the pool
// makes another. A nil groupTx is a no-op.
func (t *groupTx) abandon() {
	if t == nil {
		return
	}
	conn := t.conn.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = conn.Close(ctx) // a Terminate message, not waiting for an answer
}

// batchQueue is a storedb.DBTX that queues statements on a pgx.Batch instead of
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
