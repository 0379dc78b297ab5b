package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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

// committer owns every write to the files and the turn tables. It is a
// two-stage pipeline:
//
//   - the writer (one goroutine) takes whatever is queued as one group,
//     plans it against memory and the groups still in flight, writes and
//     fsyncs the blob pack and the turn log, and runs the group's statement
//     in an open transaction;
//   - the finisher (one goroutine) commits the groups in order, publishes
//     them to memory and answers them.
//
// So while one group's COMMIT waits for Postgres, the next group's files
// and statement are already under way. If a group fails to commit, every
// group planned on top of it fails too, and the writer cuts their records
// from the turn log before planning again.
type committer struct {
	e       *Engine
	queue   chan *job
	written chan *plan // writer → finisher
	quit    chan struct{}
	exited  chan struct{} // closed when both stages have ended
	once    sync.Once

	// Writer state.
	idem      *idemTable
	nextTurn  uint64
	seq       uint64 // groups planned
	lastGroup int    // size of the last group, for collect
	epoch     uint64 // bumped by every rollback
	shadow    *shadow
	lastSwep  time.Time

	// Shared between the stages.
	published   atomic.Uint64 // seq of the last group published
	failedEpoch atomic.Uint64 // groups of this epoch or older must not commit
	rollback    atomic.Pointer[rollbackRequest]
	broken      atomic.Pointer[error]

	appends, groups atomic.Int64 // committed by this process
}

// rollbackRequest asks the writer to cut the turn log back to where a
// failed group started, and to forget what it planned since.
type rollbackRequest struct {
	seq      uint64
	logStart int64
}

// newCommitter starts both stages; stop ends them.
func newCommitter(e *Engine, nextTurn uint64, idem *idemTable) *committer {
	c := &committer{
		e: e, queue: make(chan *job, 4*e.opts.MaxBatch), written: make(chan *plan, 1),
		quit: make(chan struct{}), exited: make(chan struct{}),
		idem: idem, nextTurn: nextTurn, epoch: 1, shadow: newShadow(), lastSwep: time.Now(),
	}
	finished := make(chan struct{})
	go func() { defer close(finished); c.finishLoop() }()
	go func() {
		c.writeLoop()
		close(c.written)
		<-finished
		close(c.exited)
	}()
	return c
}

// stop answers what is queued, then ends both stages.
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

func (c *committer) writeLoop() {
	for {
		select {
		case j := <-c.queue:
			c.write(c.collect(j))
		case <-c.quit:
			c.drain()
			return
		}
	}
}

// drain writes whatever was queued before stop.
func (c *committer) drain() {
	for {
		select {
		case j := <-c.queue:
			c.write(c.collect(j))
		default:
			return
		}
	}
}

// collect takes first and everything queued behind it, up to MaxBatch, so
// a lone append commits at once and a busy queue batches itself. One
// refinement: when the last group was large and this one is tiny, the
// writer lingers briefly for the rest. Without it, writers that wait for
// their answers fall into a rhythm of one group of one (the first request
// back) and one group of everyone else, wasting every other round trip.
func (c *committer) collect(first *job) []*job {
	batch := c.takeQueued([]*job{first})
	if want := c.lastGroup / 2; len(batch) < want && len(batch) < c.e.opts.MaxBatch {
		batch = c.linger(batch, want)
	}
	c.lastGroup = len(batch)
	return batch
}

// takeQueued appends what is queued now to batch, up to MaxBatch.
func (c *committer) takeQueued(batch []*job) []*job {
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

// maxLinger bounds how long a small group waits for company.
const maxLinger = time.Millisecond

// linger waits up to maxLinger for batch to reach want jobs.
func (c *committer) linger(batch []*job, want int) []*job {
	timer := time.NewTimer(maxLinger)
	defer timer.Stop()
	for len(batch) < want {
		select {
		case j := <-c.queue:
			batch = c.takeQueued(append(batch, j))
		case <-timer.C:
			return batch
		}
	}
	return batch
}

// write is the writer stage for one group: plan, write the files and run
// the statement, then hand the group to the finisher.
func (c *committer) write(batch []*job) {
	if err := c.applyRollback(); err != nil {
		answerAll(batch, outcome{err: err})
		return
	}
	if err := c.failed(); err != nil {
		answerAll(batch, outcome{err: err})
		return
	}
	c.shadow.forget(c.published.Load())
	now := time.Now()
	c.seq++
	p := c.plan(batch, now)
	p.seq, p.epoch = c.seq, c.epoch
	if err := c.writeGroup(p, now); err != nil {
		p.failPending(err)
		return
	}
	c.remember(p, now)
	c.written <- p
}

// applyRollback cuts the records of failed groups from the turn log and
// forgets what was planned on top of them. Only the writer writes the log,
// so the cut cannot race a write.
func (c *committer) applyRollback() error {
	r := c.rollback.Swap(nil)
	if r == nil {
		return nil
	}
	if c.e.turns.Size() > r.logStart {
		if err := c.e.turns.Truncate(r.logStart); err != nil {
			return c.fail(wrapf(KindInternal, err, "roll back turn log to %d", r.logStart))
		}
	}
	c.shadow = newShadow()
	c.idem.forgetFrom(r.seq)
	c.epoch++
	return nil
}

// remember records a written group in the planner's view: later groups
// build on its heads, turns, types and idempotency keys.
func (c *committer) remember(p *plan, now time.Time) {
	c.shadow.add(p)
	for k, i := range p.keys {
		c.idem.add(k, idemEntry{turn: p.turns[i].id, at: now, seq: p.seq, parent: p.turns[i].job.app.ParentTurnID, parentKnown: true})
	}
	if now.Sub(c.lastSwep) >= time.Minute {
		c.lastSwep = now
		c.idem.expire(now)
	}
}

// writeGroup makes a group's bytes durable and prepares its rows. The blob
// pack and the turn log are written and fsynced in parallel while Postgres
// executes the group's statement in a transaction; the finisher sends
// COMMIT only after all of it, so a committed row never names bytes a
// crash could lose.
func (c *committer) writeGroup(p *plan, now time.Time) error {
	var blobErr, logErr, stmtErr error
	var wg sync.WaitGroup
	if len(p.puts) > 0 {
		wg.Go(func() { p.putResults, blobErr = c.e.blobs.Put(p.puts) })
	}
	// The writer is the log's only writer, so the group's records start at
	// its current end; the statement records that offset.
	p.logStart = c.e.turns.Size()
	if len(p.turns) > 0 {
		wg.Go(func() { logErr = c.appendRecords(p) })
		p.tx, stmtErr = c.e.sendGroup(p.params(c.e, now, c.nextTurn))
		if stmtErr == nil {
			if stmtErr = p.tx.await(); stmtErr != nil {
				p.tx = nil
			}
		}
	}
	wg.Wait()
	p.packEnd = c.e.blobs.Stats().PackBytes
	if err := c.filesWritten(p, blobErr, logErr); err != nil {
		p.tx.rollback()
		return err
	}
	if stmtErr != nil {
		return c.statementFailed(p, stmtErr)
	}
	if c.e.opts.hooks.crash(stepFilesWritten) {
		p.tx.rollback()
		return c.crash()
	}
	return nil
}

func (c *committer) appendRecords(p *plan) error {
	start, err := c.e.turns.Append(p.records)
	if err == nil && start != p.logStart {
		err = fmt.Errorf("turn log grew behind the committer: records at %d, expected %d", start, p.logStart)
	}
	return err
}

// filesWritten checks the file writes. A failed write stops the store:
// the file is in a state only recovery sorts out.
func (c *committer) filesWritten(p *plan, blobErr, logErr error) error {
	if logErr != nil {
		return c.fail(wrapf(KindInternal, logErr, "write turn log"))
	}
	if blobErr != nil {
		if len(p.turns) > 0 {
			if err := c.e.turns.Truncate(p.logStart); err != nil {
				return c.fail(wrapf(KindInternal, err, "roll back turn log after failed blob write (%v)", blobErr))
			}
		}
		return c.fail(wrapf(KindInternal, blobErr, "write blobs"))
	}
	return nil
}

// statementFailed cuts the group's records (nothing of it committed) and
// fails it. The groups before it are unaffected.
func (c *committer) statementFailed(p *plan, err error) error {
	if terr := c.e.turns.Truncate(p.logStart); terr != nil {
		return c.fail(wrapf(KindInternal, terr, "roll back turn log after failed statement (%v)", err))
	}
	return commitError(err)
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

func answerAll(batch []*job, o outcome) {
	for _, j := range batch {
		j.done <- o
	}
}
