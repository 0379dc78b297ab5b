// Package groupcommit is the turn store's committer: the one writer of
// the blob pack, the turn log and the in-memory index once the store is
// open. It takes appends and blob puts from any goroutine, commits them in
// groups (one write and one fdatasync per file and one Postgres statement
// for every append queued while the previous group was committing) and
// answers each once its group is durable and published, or failed.
// docs/storage.md states the protocol: what is written in which order,
// what is fsynced when, and what a group that does not commit leaves.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgbound"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/idemindex"
	"github.com/cardboxhq/cardbox/store/internal/dedupfence"
	"github.com/cardboxhq/cardbox/store/internal/memindex"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/internal/storetype"
	"github.com/cardboxhq/cardbox/store/internal/usage"
	"github.com/cardboxhq/cardbox/store/syncfile"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// Config is what a Committer writes to and how it behaves; recovery
// opens the files and loads the index before the Committer starts.
type Config struct {
	Pool    *pgxpool.Pool
	StoreID pgtype.UUID // the turn_stores row the group statements name
	Blobs   *blobpack.Pack
	Turns   *turnlog.Log
	// Index is published to as groups commit; Idem holds the idempotency
	// keys of the window, and learns each group's as it is written.
	Index *memindex.Index
	Idem  *idemindex.Table
	// Usage is charged each committed group's turns and grants.
	Usage *usage.Ledger
	// TenantID names tenant number no, for the rows of the group's
	// statement; every tenant a job names must be known to it.
	TenantID func(no uint32) string
	// NextTurn is the first turn id to hand out.
	NextTurn uint64
	// MaxBatch caps how many jobs one group takes.
	MaxBatch int
	// PGTimeout bounds a job from when it is queued to its group's
	// COMMIT's answer, and each question of a resolver.
	PGTimeout time.Duration
	// OnAppend, if set, is told of every group of turns once committed
	// and readable, in commit order; it must return quickly.
	OnAppend func([]storetype.Appended)
	// Now is the clock of the turns' created_at and of the idempotency
	// keys.
	Now func() time.Time
	Log *slog.Logger
	// Dedup, if set, counts each group from before it looks its blobs
	// up in the pack until its claims to them are committed or never
	// will be, for a compaction of the pack to wait for (see package
	// dedupfence).
	Dedup *dedupfence.Fence
	// Hooks are test-only fault injection points; nil in production.
	Hooks *Hooks
}

// Job is one append or one blob put waiting for the committer.
type Job struct {
	Tenant  ident.Tenant
	Request *storetype.AppendRequest // nil for a blob put
	Raw     []byte                   // uncompressed payload, or the blob to put
	Hash    ident.Hash               // BLAKE3 of Raw
	Stored  []byte                   // Raw as the pack stores it (see blobpack.Encode); nil: the pack encodes it
	Codec   blobpack.Codec           // how Stored is encoded
	Handed  []byte                   // a copy of Raw for Config.OnAppend; nil if none
	// IdemMark is Config.Idem's Mark, taken before the append checked
	// whether memory may miss its idempotency key (idemindex.Table.MayMiss).
	IdemMark uint64
	// IdemKey is the idempotency key's idemindex.Key when IdemKeySet
	// (the caller hashed it already); else the planner hashes it.
	IdemKey    idemindex.Key
	IdemKeySet bool
	done       chan Outcome // buffered: the committer never blocks on it
	// deadline is when an append must be answered: Config.PGTimeout
	// after it was queued. Its group's statement and COMMIT must be
	// answered by then (see plan.deadline).
	deadline time.Time
}

// idemKey returns the idemindex.Key of j's idempotency key.
func (j *Job) idemKey() idemindex.Key {
	if j.IdemKeySet {
		return j.IdemKey
	}
	return idemindex.NewKey(j.Tenant.No, j.Request.ContextID, j.Request.IdempotencyKey)
}

// Answered delivers j's outcome once Submit has queued j: for the caller
// whose Submit returned a pending outcome.
func (j *Job) Answered() <-chan Outcome { return j.done }

// Outcome answers a job.
type Outcome struct {
	Result storetype.AppendResult
	Entry  blobpack.Entry // for blob puts
	IsNew  bool           // for blob puts: the pack did not hold the blob
	Err    error
	// Pending: the caller stopped waiting (its ctx ended) while the job
	// was queued or in flight; its outcome still comes (Job.Answered).
	Pending bool
}

// Committer owns every write to the files and the index. It is a
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
type Committer struct {
	cfg Config
	// queries asks Postgres about a group whose COMMIT went unanswered,
	// each statement bounded by Config.PGTimeout.
	queries *storedb.Queries
	queue   chan *Job
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

// New starts the committer's two stages; Stop ends them.
func New(cfg Config) *Committer {
	c := &Committer{
		cfg:     cfg,
		queries: storedb.New(pgrole.As(pgbound.Batcher{D: cfg.Pool, Timeout: cfg.PGTimeout}, pgrole.Committer, "")),
		queue:   make(chan *Job, 4*cfg.MaxBatch), written: make(chan *plan, 1),
		quit: make(chan struct{}), exited: make(chan struct{}),
		idem: cfg.Idem, nextTurn: cfg.NextTurn, epoch: 1, shadow: newShadow(), lastSwep: cfg.Now(),
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

// Stop answers what is queued, then ends both stages and every resolver.
func (c *Committer) Stop() {
	c.once.Do(func() { close(c.quit) })
	<-c.exited
}

// Done is closed once the committer has stopped.
func (c *Committer) Done() <-chan struct{} { return c.exited }

// Healthy returns why the committer refuses appends, if it does: it
// broke (its files or Postgres are in a state only a restart sorts
// out), or a group's outcome is being resolved.
func (c *Committer) Healthy() error {
	if err := c.failed(); err != nil {
		return err
	}
	return c.resolvingErr()
}

// Stats counts the work of the committer since it started.
type Stats struct {
	Appends, Groups int64 // committed
	// The time groups with turns spent making their files durable,
	// running their statement and committing (see store.Stats).
	FilesTime, StatementTime, CommitTime time.Duration
}

// Stats returns the committer's counts.
func (c *Committer) Stats() Stats {
	return Stats{
		Appends: c.appends.Load(), Groups: c.groups.Load(),
		FilesTime: time.Duration(c.filesNs.Load()), StatementTime: time.Duration(c.statementNs.Load()),
		CommitTime: time.Duration(c.commitNs.Load()),
	}
}

// failed returns why the committer refuses work, if it does.
func (c *Committer) failed() error {
	if p := c.broken.Load(); p != nil {
		return *p
	}
	return nil
}

func (c *Committer) breakDown(err error) {
	c.broken.CompareAndSwap(nil, &err)
}

// Submit queues j and waits for its outcome. When ctx ends while j is
// queued or in flight, the outcome is Pending: j may still commit, and
// its outcome comes on j.Answered.
func (c *Committer) Submit(ctx context.Context, j *Job) Outcome {
	if err := c.failed(); err != nil {
		return Outcome{Err: err}
	}
	j.done = make(chan Outcome, 1)
	j.deadline = time.Now().Add(c.cfg.PGTimeout)
	select {
	case c.queue <- j:
	case <-c.quit:
		return Outcome{Err: storetype.ErrClosed}
	case <-ctx.Done():
		return Outcome{Err: ctx.Err()}
	}
	select {
	case o := <-j.done:
		return o
	case <-c.exited:
		select {
		case o := <-j.done:
			return o
		default:
			return Outcome{Err: storetype.ErrClosed}
		}
	case <-ctx.Done():
		// The append may still commit; a retry with the same idempotency
		// key finds it.
		return Outcome{Err: ctx.Err(), Pending: true}
	}
}

func (c *Committer) writeLoop() {
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
func (c *Committer) drain() {
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
func (c *Committer) collect(first *Job) []*Job {
	batch := c.takeQueued([]*Job{first})
	if want := c.lastGroup / 2; len(batch) < want && len(batch) < c.cfg.MaxBatch {
		batch = c.linger(batch, want)
	}
	c.lastGroup = len(batch)
	return batch
}

// takeQueued appends what is queued now to batch, up to MaxBatch.
func (c *Committer) takeQueued(batch []*Job) []*Job {
	for len(batch) < c.cfg.MaxBatch {
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
func (c *Committer) linger(batch []*Job, want int) []*Job {
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
func (c *Committer) write(batch []*Job) {
	// resolving first: a resolver posts its rollback before it clears
	// resolving, so the rollback is seen below.
	if err := c.resolvingErr(); err != nil {
		answerAll(batch, Outcome{Err: err})
		return
	}
	if err := c.applyRollback(); err != nil {
		answerAll(batch, Outcome{Err: err})
		return
	}
	if err := c.failed(); err != nil {
		answerAll(batch, Outcome{Err: err})
		return
	}
	if batch = expire(batch, time.Now()); len(batch) == 0 {
		return
	}
	c.shadow.forget(c.published.Load())
	c.seq++
	dedup := c.cfg.Dedup.Enter() // before the plan looks the blobs up
	p := c.plan(batch, c.cfg.Now())
	p.seq, p.epoch, p.deadline, p.dedup = c.seq, c.epoch, groupDeadline(batch), dedup
	if err := c.writeGroup(p); err != nil {
		if !c.retryAlone(p, err) {
			p.failPending(err)
		}
		dedup.Leave() // nothing of it committed
		return
	}
	c.remember(p)
	c.written <- p
}

// expire answers the appends of batch that waited past their deadline
// (the writer was held up by a Postgres or a disk that did not answer)
// and returns the others. Blob puts need no Postgres and stay.
func expire(batch []*Job, now time.Time) []*Job {
	kept := batch[:0]
	for _, j := range batch {
		if j.Request != nil && !now.Before(j.deadline) {
			j.done <- Outcome{Err: fault.New(fault.Unavailable, "the append waited longer than its deadline for the appends before it (Postgres or the disk did not answer in time); retry")}
			continue
		}
		kept = append(kept, j)
	}
	return kept
}

// groupDeadline is when a group's statement and COMMIT must be answered:
// the earliest deadline of its appends (zero for a group of blob puts,
// which sends no statement).
func groupDeadline(batch []*Job) time.Time {
	var d time.Time
	for _, j := range batch {
		if j.Request != nil && (d.IsZero() || j.deadline.Before(d)) {
			d = j.deadline
		}
	}
	return d
}

// retryAlone makes one bad append fail alone: when Postgres refused a
// group's statement for its data, each of the group's appends is written
// again as a group of its own, and only the one at fault fails. It reports
// whether it did so.
func (c *Committer) retryAlone(p *plan, err error) bool {
	if fault.KindOf(err) != fault.Unprocessable || len(p.jobs) < 2 {
		return false
	}
	c.cfg.Log.Warn("Postgres refused a group's data; retrying its appends one by one", "appends", len(p.jobs), "err", err)
	for _, j := range p.jobs {
		if o, ok := p.outcomes[j]; ok && o.Err != nil {
			j.done <- o // refused while planning: nothing to retry
			continue
		}
		c.write([]*Job{j})
	}
	return true
}

// applyRollback cuts the records of failed groups from the turn log and
// forgets what was planned on top of them. Only the writer writes the log,
// so the cut cannot race a write.
func (c *Committer) applyRollback() error {
	r := c.rollback.Swap(nil)
	if r == nil {
		return nil
	}
	if c.cfg.Turns.Size() > r.logStart {
		if err := c.cfg.Turns.Truncate(r.logStart); err != nil {
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
func (c *Committer) remember(p *plan) {
	now := p.now
	c.shadow.add(p)
	for k, i := range p.keys {
		c.idem.Add(k, idemindex.Entry{Turn: p.turns[i].id, At: now, Seq: p.seq, Parent: p.turns[i].job.Request.ParentTurnID, ParentKnown: true})
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
func (c *Committer) writeGroup(p *plan) error {
	// The writer is the log's only writer, so the group's records start at
	// its current end; the statement records that offset, and where the
	// pack will end once the group's blobs are written.
	p.logStart = c.cfg.Turns.Size()
	staged, err := c.cfg.Blobs.Stage(p.puts)
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
	if c.cfg.Hooks.crash(StepFilesWritten) {
		p.tx.abandon()
		return c.crash()
	}
	return nil
}

// writeFiles writes the group's staged blobs (on a goroutine) and its turn
// records (on this one). With statement, it sends the group's statement
// first and reads its answer last, so that Postgres runs it meanwhile.
func (c *Committer) writeFiles(p *plan, staged *blobpack.Staged, statement bool) (blobErr, logErr, stmtErr error) {
	var wg sync.WaitGroup
	start := time.Now()
	var blobTook, logTook time.Duration // for the step timings (Stats)
	if len(p.puts) > 0 {
		wg.Go(func() { p.putResults, blobErr = c.cfg.Blobs.Write(staged); blobTook = time.Since(start) })
	}
	if len(p.turns) > 0 {
		var tx *groupTx
		if statement {
			tx, stmtErr = c.sendGroup(p.params(c), p.deadline)
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
func (c *Committer) startStatement(p *plan) error {
	tx, err := c.sendGroup(p.params(c), p.deadline)
	if err != nil {
		return err
	}
	if err := tx.await(); err != nil {
		return err
	}
	p.tx = tx
	return nil
}

func (c *Committer) appendRecords(p *plan) error {
	start, err := c.cfg.Turns.Append(p.records)
	if err == nil && start != p.logStart {
		err = fmt.Errorf("turn log grew behind the committer: records at %d, expected %d", start, p.logStart)
	}
	return err
}

// filesWritten checks the file writes. A full disk fails only this group:
// the files were cut back and take writes again once space is free. Any
// other failed write stops the store: the file is in a state only
// recovery sorts out.
func (c *Committer) filesWritten(p *plan, blobErr, logErr error) error {
	if blobErr == nil && logErr == nil {
		return nil
	}
	if logErr == nil && len(p.turns) > 0 {
		if err := c.cfg.Turns.Truncate(p.logStart); err != nil {
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
func (c *Committer) statementFailed(p *plan, err error) error {
	if terr := c.cfg.Turns.Truncate(p.logStart); terr != nil {
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
func (c *Committer) fail(err *fault.Error) error {
	c.cfg.Log.Error("turn store stopped accepting writes", "err", err)
	c.breakDown(err)
	return err
}

func (c *Committer) crash() error {
	c.breakDown(ErrCrashed)
	return ErrCrashed
}

func answerAll(batch []*Job, o Outcome) {
	for _, j := range batch {
		j.done <- o
	}
}
