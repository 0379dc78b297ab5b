package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/sqlc/db"
	"github.com/cardboxhq/cardbox/store/blobpack"
)

// job is one append or one blob put waiting for the committer.
type job struct {
	tenant Tenant
	app    *AppendRequest // nil for a blob put
	raw    []byte         // uncompressed payload, or the blob to put
	hash   Hash           // BLAKE3 of raw
	stored []byte         // raw as the pack stores it (see blobpack.Encode); nil if the pack has it
	codec  blobpack.Codec // how stored is encoded
	done   chan outcome   // buffered: the committer never blocks on it
}

// outcome answers a job.
type outcome struct {
	res   AppendResult
	entry blobpack.Entry // for blob puts
	isNew bool           // for blob puts
	err   error
}

// committer owns every write to the files and the turn tables: one
// goroutine takes whatever is queued and commits it as one group.
type committer struct {
	e      *Engine
	queue  chan *job
	quit   chan struct{}
	exited chan struct{}
	once   sync.Once

	idem     idemTable
	nextTurn uint64
	lastSwep time.Time
	broken   atomic.Pointer[error]

	appends, groups atomic.Int64 // committed by this process
}

// newCommitter starts the committer goroutine; stop ends it.
func newCommitter(e *Engine, nextTurn uint64, idem idemTable) *committer {
	c := &committer{
		e: e, queue: make(chan *job, 4*e.opts.MaxBatch), quit: make(chan struct{}), exited: make(chan struct{}),
		idem: idem, nextTurn: nextTurn, lastSwep: time.Now(),
	}
	go c.run()
	return c
}

// stop answers what is queued, then ends the goroutine.
func (c *committer) stop() {
	c.once.Do(func() { close(c.quit) })
	<-c.exited
}

// failed returns why the committer refuses work, if it does.
func (c *committer) failed() error {
	if p := c.broken.Load(); p != nil {
		return *p
	}
	return nil
}

func (c *committer) breakDown(err error) {
	c.broken.CompareAndSwap(nil, &err)
}

// submit queues j and waits for its outcome.
func (c *committer) submit(ctx context.Context, j *job) outcome {
	if err := c.failed(); err != nil {
		return outcome{err: err}
	}
	select {
	case c.queue <- j:
	case <-c.quit:
		return outcome{err: ErrClosed}
	case <-ctx.Done():
		return outcome{err: ctx.Err()}
	}
	select {
	case o := <-j.done:
		return o
	case <-c.exited:
		select {
		case o := <-j.done:
			return o
		default:
			return outcome{err: ErrClosed}
		}
	case <-ctx.Done():
		// The append may still commit; a retry with the same idempotency
		// key finds it.
		return outcome{err: ctx.Err()}
	}
}

func (c *committer) run() {
	defer close(c.exited)
	for {
		select {
		case j := <-c.queue:
			c.commit(c.collect(j))
		case <-c.quit:
			c.drain()
			return
		}
	}
}

// drain commits whatever was queued before stop.
func (c *committer) drain() {
	for {
		select {
		case j := <-c.queue:
			c.commit(c.collect(j))
		default:
			return
		}
	}
}

// collect takes first and everything queued behind it, up to MaxBatch: no
// timer, so a lone append commits at once and a busy queue batches itself.
func (c *committer) collect(first *job) []*job {
	batch := []*job{first}
	for len(batch) < c.e.opts.MaxBatch {
		select {
		case j := <-c.queue:
			batch = append(batch, j)
		default:
			return batch
		}
	}
	return batch
}

// commit runs one group: plan, write files, commit Postgres, publish, answer.
func (c *committer) commit(batch []*job) {
	if err := c.failed(); err != nil {
		answerAll(batch, outcome{err: err})
		return
	}
	now := time.Now()
	p := c.plan(batch, now)
	if err := c.commitPlan(p, now); err != nil {
		p.failPending(err)
		return
	}
	c.publish(p, now)
	c.appends.Add(int64(len(p.turns)))
	c.groups.Add(1)
	c.sweepKeys(now)
}

// commitPlan makes a plan durable. The blob pack and the turn log are
// written and fsynced in parallel while Postgres already executes the
// group's statement inside a transaction; COMMIT is sent only once both
// files are durable, so a committed row never names bytes a crash could
// lose.
func (c *committer) commitPlan(p *plan, now time.Time) error {
	var blobErr, logErr error
	var wg sync.WaitGroup
	if len(p.puts) > 0 {
		wg.Go(func() { p.putResults, blobErr = c.e.blobs.Put(p.puts) })
	}
	// The committer is the log's only writer, so the group's records start
	// at its current end; the statement records that offset.
	p.logStart = c.e.turns.Size()
	if len(p.turns) > 0 {
		wg.Go(func() {
			start, err := c.e.turns.Append(p.records)
			if err == nil && start != p.logStart {
				err = fmt.Errorf("turn log grew behind the committer: records at %d, expected %d", start, p.logStart)
			}
			logErr = err
		})
	}
	var tx pgx.Tx
	var stmtErr error
	if len(p.turns) > 0 {
		tx, stmtErr = c.execInTx(p, now)
	}
	wg.Wait()
	if err := c.filesWritten(p, blobErr, logErr); err != nil {
		rollback(tx)
		return err
	}
	if tx == nil && stmtErr == nil {
		return nil // a group of blob puts only
	}
	if c.e.opts.hooks.crash(stepFilesWritten) {
		rollback(tx)
		return c.crash()
	}
	if err := c.commitRows(p, tx, stmtErr); err != nil {
		return err
	}
	if c.e.opts.hooks.crash(stepCommitted) {
		return c.crash()
	}
	return nil
}

// filesWritten checks the file writes. A failed write stops the store:
// the file is in a state only recovery sorts out.
func (c *committer) filesWritten(p *plan, blobErr, logErr error) error {
	if blobErr != nil {
		if logErr == nil && len(p.turns) > 0 {
			if err := c.e.turns.Truncate(p.logStart); err != nil {
				return c.fail(wrapf(KindInternal, err, "roll back turn log after failed blob write (%v)", blobErr))
			}
		}
		return c.fail(wrapf(KindInternal, blobErr, "write blobs"))
	}
	if logErr != nil {
		return c.fail(wrapf(KindInternal, logErr, "write turn log"))
	}
	return nil
}

// execInTx begins a transaction and runs the group's statement in it.
func (c *committer) execInTx(p *plan, now time.Time) (pgx.Tx, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := c.e.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.e.q.WithTx(tx).CommitAppendBatch(ctx, p.params(c.e, now, c.nextTurn)); err != nil {
		rollback(tx)
		return nil, err
	}
	return tx, nil
}

func rollback(tx pgx.Tx) {
	if tx != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(ctx)
	}
}

// commitRows commits the group's transaction. When the outcome is unknown
// (the connection broke around COMMIT) it asks Postgres which it was; a
// group that did not commit is cut from the turn log, so the log holds
// committed turns only (plus, after a crash, a tail recovery cuts).
func (c *committer) commitRows(p *plan, tx pgx.Tx, stmtErr error) error {
	err := stmtErr
	committed, known := false, stmtErr != nil // a failed statement committed nothing
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = tx.Commit(ctx)
		cancel()
		if err == nil {
			return nil
		}
		var pgErr *pgconn.PgError
		if known = errors.As(err, &pgErr); !known {
			committed, known = c.wasCommitted(p)
		}
	}
	if known && committed {
		return nil
	}
	if !known {
		return c.fail(wrapf(KindUnavailable, err, "commit turns: outcome unknown, restart to reconcile"))
	}
	if terr := c.e.turns.Truncate(p.logStart); terr != nil {
		return c.fail(wrapf(KindInternal, terr, "roll back turn log after failed commit (%v)", err))
	}
	kind := KindUnavailable
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		kind = KindInternal
	}
	return wrapf(kind, err, "commit turns")
}

// wasCommitted asks Postgres whether the group's first turn exists,
// retrying while Postgres is unreachable (every append waits meanwhile)
// until it answers or the store shuts down.
func (c *committer) wasCommitted(p *plan) (committed, known bool) {
	first := p.turns[0]
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, err := c.e.q.TurnExists(ctx, db.TurnExistsParams{TenantID: first.tenantID(c.e), TurnID: int64(first.id)})
		cancel()
		if err == nil {
			return ok, true
		}
		c.e.log.Warn("cannot tell whether a group committed; retrying", "err", err, "retry_in", delay)
		select {
		case <-c.quit:
			return false, false
		case <-time.After(delay):
		}
	}
}

// fail marks the committer broken: its files or Postgres are in a state
// only recovery (a restart) sorts out, so it takes no more work.
func (c *committer) fail(err *Error) error {
	c.e.log.Error("turn store stopped accepting writes", "err", err)
	c.breakDown(err)
	return err
}

func (c *committer) crash() error {
	c.breakDown(errCrashed)
	return errCrashed
}

// publish makes the group visible, then answers it.
func (c *committer) publish(p *plan, now time.Time) {
	for _, t := range p.turns {
		c.e.table.set(t.id, t.meta)
	}
	c.e.table.publish(p.maxTurn)
	for id, s := range p.heads {
		c.e.contexts.put(id, s)
	}
	for _, t := range p.newTypes {
		c.e.types.add(t.tenant, t.ref, t.typeID)
	}
	for k, i := range p.keys {
		c.idem.m[k] = idemEntry{turn: p.turns[i].id, at: now}
	}
	p.answer()
}

// sweepKeys forgets expired idempotency keys once a minute.
func (c *committer) sweepKeys(now time.Time) {
	if now.Sub(c.lastSwep) < time.Minute {
		return
	}
	c.lastSwep = now
	c.idem.expire(now)
}

func answerAll(batch []*job, o outcome) {
	for _, j := range batch {
		j.done <- o
	}
}
