package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/idemindex"
	"github.com/cardboxhq/cardbox/store/syncfile"
)

// job is one append or one blob put waiting for the committer.
type job struct {
	tenant ident.Tenant
	app    *AppendRequest // nil for a blob put
	raw    []byte         // uncompressed payload, or the blob to put
	hash   ident.Hash     // BLAKE3 of raw
	stored []byte         // raw as the pack stores it (see blobpack.Encode); nil if the pack has it
	codec  blobpack.Codec // how stored is encoded
	handed []byte         // a copy of raw for Options.OnAppend; nil if none
	done   chan outcome   // buffered: the committer never blocks on it
	// deadline is when an append must be answered: Options.PGTimeout
	// after it was queued. Its group's statement and COMMIT must be
	// answered by then (see plan.deadline).
	deadline time.Time
}

// outcome answers a job.
type outcome struct {
	res   AppendResult
	entry blobpack.Entry // for blob puts
	isNew bool           // for blob puts
	err   error
	// pending: the caller stopped waiting (its ctx ended) while the job
	// was queued or in flight; its outcome still comes on the job's done.
	pending bool
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
	exited  chan struct{} // closed when both stages and every resolver have ended
	once    sync.Once
	// resolvers are the goroutines finding out whether a group whose
	// COMMIT got no answer committed (see unknownOutcome).
	resolvers sync.WaitGroup

	// Writer state.
	idem      *idemindex.Table
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
	// dbDown is set when Postgres failed a group for being unavailable and
	// cleared when a group commits; meanwhile groups hear from Postgres
	// before they write any file (see writeGroup).
	dbDown atomic.Bool
	// resolving is set while the outcome of a group whose COMMIT got no
	// answer in time is unknown; meanwhile the writer refuses work (see
	// unknownOutcome).
	resolving atomic.Bool

	appends, groups atomic.Int64 // committed by this process
	// Time the groups with turns spent in each step (see Stats).
	filesNs, statementNs, commitNs atomic.Int64
}

// rollbackRequest asks the writer to cut the turn log back to where a
// failed group started, and to forget what it planned since.
type rollbackRequest struct {
	seq      uint64
	logStart int64
}

// newCommitter starts both stages; stop ends them.
func newCommitter(e *Engine, nextTurn uint64, idem *idemindex.Table) *committer {
	c := &committer{
		e: e, queue: make(chan *job, 4*e.opts.MaxBatch), written: make(chan *plan, 1),
		quit: make(chan struct{}), exited: make(chan struct{}),
		idem: idem, nextTurn: nextTurn, epoch: 1, shadow: newShadow(), lastSwep: e.now(),
	}
	finished := make(chan struct{})
	go func() { defer close(finished); c.finishLoop() }()
	go func() {
		c.writeLoop()
		close(c.written)
		<-finished
		c.resolvers.Wait()
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
	j.deadline = time.Now().Add(c.e.opts.PGTimeout)
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
		return outcome{err: ctx.Err(), pending: true}
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
	// resolving first: a resolver posts its rollback before it clears
	// resolving, so the rollback is seen below.
	if err := c.resolvingErr(); err != nil {
		answerAll(batch, outcome{err: err})
		return
	}
	if err := c.applyRollback(); err != nil {
		answerAll(batch, outcome{err: err})
		return
	}
	if err := c.failed(); err != nil {
		answerAll(batch, outcome{err: err})
		return
	}
	if batch = expire(batch, time.Now()); len(batch) == 0 {
		return
	}
	c.shadow.forget(c.published.Load())
	c.seq++
	p := c.plan(batch, c.e.now())
	p.seq, p.epoch, p.deadline = c.seq, c.epoch, groupDeadline(batch)
	if err := c.writeGroup(p); err != nil {
		if !c.retryAlone(p, err) {
			p.failPending(err)
		}
		return
	}
	c.remember(p)
	c.written <- p
}

// expire answers the appends of batch that waited past their deadline
// (the writer was held up by a Postgres or a disk that did not answer)
// and returns the others. Blob puts need no Postgres and stay.
func expire(batch []*job, now time.Time) []*job {
	kept := batch[:0]
	for _, j := range batch {
		if j.app != nil && !now.Before(j.deadline) {
			j.done <- outcome{err: fault.New(fault.Unavailable, "the append waited longer than its deadline for the appends before it (Postgres or the disk did not answer in time); retry")}
			continue
		}
		kept = append(kept, j)
	}
	return kept
}

// groupDeadline is when a group's statement and COMMIT must be answered:
// the earliest deadline of its appends (zero for a group of blob puts,
// which sends no statement).
func groupDeadline(batch []*job) time.Time {
	var d time.Time
	for _, j := range batch {
		if j.app != nil && (d.IsZero() || j.deadline.Before(d)) {
			d = j.deadline
		}
	}
	return d
}

// retryAlone makes one bad append fail alone: when Postgres refused a
// group's statement for its data, each of the group's appends is written
// again as a group of its own, and only the one at fault fails. It reports
// whether it did so.
func (c *committer) retryAlone(p *plan, err error) bool {
	if fault.KindOf(err) != fault.Unprocessable || len(p.jobs) < 2 {
		return false
	}
	c.e.log.Warn("Postgres refused a group's data; retrying its appends one by one", "appends", len(p.jobs), "err", err)
	for _, j := range p.jobs {
		if o, ok := p.outcomes[j]; ok && o.err != nil {
			j.done <- o // refused while planning: nothing to retry
			continue
		}
		c.write([]*job{j})
	}
	return true
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
			return c.fail(fault.Wrap(fault.Internal, err, "roll back turn log to %d", r.logStart))
		}
	}
	c.shadow = newShadow()
	c.idem.ForgetFrom(r.seq)
	c.epoch++
	return nil
}

// remember records a written group in the planner's view: later groups
// build on its heads, turns, types and idempotency keys.
func (c *committer) remember(p *plan) {
	now := p.now
	c.shadow.add(p)
	for k, i := range p.keys {
		c.idem.Add(k, idemindex.Entry{Turn: p.turns[i].id, At: now, Seq: p.seq, Parent: p.turns[i].job.app.ParentTurnID, ParentKnown: true})
	}
	if now.Sub(c.lastSwep) >= time.Minute {
		c.lastSwep = now
		c.idem.Expire(now)
	}
}

// writeGroup makes a group's bytes durable and prepares its rows. The blob
// pack and the turn log are written and fsynced in parallel while Postgres
// executes the group's statement in a transaction; the finisher sends
// COMMIT only after all of it, so a committed row never names bytes a
// crash could lose.
//
// After Postgres failed a group for being unreachable, the next groups run
// their statement first and write their files only once it succeeded, so
// that an outage does not fill the pack with blobs no row will name.
func (c *committer) writeGroup(p *plan) error {
	// The writer is the log's only writer, so the group's records start at
	// its current end; the statement records that offset, and where the
	// pack will end once the group's blobs are written.
	p.logStart = c.e.turns.Size()
	staged, err := c.e.blobs.Stage(p.puts)
	if err != nil {
		return c.filesWritten(p, err, nil)
	}
	p.packEnd = staged.End
	probe := len(p.turns) > 0 && c.dbDown.Load()
	if probe {
		if err := c.startStatement(p); err != nil {
			return c.statementFailed(p, err)
		}
	}
	blobErr, logErr, stmtErr := c.writeFiles(p, staged, !probe)
	if err := c.filesWritten(p, blobErr, logErr); err != nil {
		p.tx.abandon()
		return err
	}
	if stmtErr != nil {
		return c.statementFailed(p, stmtErr)
	}
	if c.e.opts.hooks.crash(stepFilesWritten) {
		p.tx.abandon()
		return c.crash()
	}
	return nil
}

// writeFiles writes the group's staged blobs (on a goroutine) and its turn
// records (on this one). With statement, it sends the group's statement
// first and reads its answer last, so that Postgres runs it meanwhile.
func (c *committer) writeFiles(p *plan, staged *blobpack.Staged, statement bool) (blobErr, logErr, stmtErr error) {
	var wg sync.WaitGroup
	start := time.Now()
	var blobTook, logTook time.Duration // for the step timings (Stats)
	if len(p.puts) > 0 {
		wg.Go(func() { p.putResults, blobErr = c.e.blobs.Write(staged); blobTook = time.Since(start) })
	}
	if len(p.turns) > 0 {
		var tx *groupTx
		if statement {
			tx, stmtErr = c.e.sendGroup(p.params(c.e, c.nextTurn), p.deadline)
		}
		logErr = c.appendRecords(p)
		logTook = time.Since(start)
		if tx != nil {
			if stmtErr = tx.await(); stmtErr == nil {
				p.tx = tx
			}
			c.statementNs.Add(int64(time.Since(start)))
		}
	}
	wg.Wait()
	if len(p.turns) > 0 {
		c.filesNs.Add(int64(max(blobTook, logTook)))
	}
	return blobErr, logErr, stmtErr
}

// startStatement sends BEGIN and the group's statement and waits for them;
// on success the group's transaction stays open for COMMIT.
func (c *committer) startStatement(p *plan) error {
	tx, err := c.e.sendGroup(p.params(c.e, c.nextTurn), p.deadline)
	if err != nil {
		return err
	}
	if err := tx.await(); err != nil {
		return err
	}
	p.tx = tx
	return nil
}

func (c *committer) appendRecords(p *plan) error {
	start, err := c.e.turns.Append(p.records)
	if err == nil && start != p.logStart {
		err = fmt.Errorf("turn log grew behind the committer: records at %d, expected %d", start, p.logStart)
	}
	return err
}

// filesWritten checks the file writes. A full disk fails only this group:
// the files were cut back and take writes again once space is free. Any
// other failed write stops the store: the file is in a state only
// recovery sorts out.
func (c *committer) filesWritten(p *plan, blobErr, logErr error) error {
	if blobErr == nil && logErr == nil {
		return nil
	}
	if logErr == nil && len(p.turns) > 0 {
		if err := c.e.turns.Truncate(p.logStart); err != nil {
			return c.fail(fault.Wrap(fault.Internal, err, "roll back turn log after failed blob write (%v)", blobErr))
		}
	}
	full := func(err error) bool { return err == nil || errors.Is(err, syncfile.ErrNoSpace) }
	if full(blobErr) && full(logErr) {
		return fault.Wrap(fault.DiskFull, errors.Join(blobErr, logErr), "disk full: the append was not written; free space in the data directory and retry")
	}
	if logErr != nil {
		return c.fail(fault.Wrap(fault.Internal, logErr, "write turn log"))
	}
	return c.fail(fault.Wrap(fault.Internal, blobErr, "write blobs"))
}

// statementFailed cuts the group's records (nothing of it committed) and
// fails it. The groups before it are unaffected.
func (c *committer) statementFailed(p *plan, err error) error {
	if terr := c.e.turns.Truncate(p.logStart); terr != nil {
		return c.fail(fault.Wrap(fault.Internal, terr, "roll back turn log after failed statement (%v)", err))
	}
	err = commitError(err)
	if fault.KindOf(err) == fault.Unavailable {
		c.dbDown.Store(true)
	}
	return err
}

// fail marks the committer broken: its files or Postgres are in a state
// only recovery (a restart) sorts out, so it takes no more work.
func (c *committer) fail(err *fault.Error) error {
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
