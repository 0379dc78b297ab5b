package groupcommit

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgerr"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/internal/storetype"
	"github.com/cardboxhq/cardbox/store/internal/usage"
)

// finishLoop is the finisher stage: it commits the written groups in order,
// publishes and answers them.
func (c *Committer) finishLoop() {
	for p := range c.written {
		c.finish(p)
	}
}

func (c *Committer) finish(p *plan) {
	settled := true // but for a group whose outcome a resolver settles
	defer func() {
		if settled {
			p.dedup.Leave()
		}
	}()
	if err := c.doomed(p); err != nil {
		p.failPending(err)
		p.tx.abandon() // Postgres may not be answering: nothing waits for it
		return
	}
	if p.tx != nil {
		switch err := c.commitGroup(p); {
		case errors.Is(err, errAnsweredUnknown):
			settled = false
			return // answered; a resolver settles the group
		case err != nil:
			c.groupFailed(p, err)
			return
		}
		if c.cfg.Hooks.crash(StepCommitted) {
			p.failPending(c.crash())
			return
		}
	}
	c.publish(p)
}

// groupFailed fails a group that did not commit, and every group planned
// on top of it, and asks the writer to cut their records.
func (c *Committer) groupFailed(p *plan, err error) {
	if fault.KindOf(err) == fault.Unavailable {
		c.dbDown.Store(true)
	}
	c.failedEpoch.Store(p.epoch)
	c.rollback.Store(&rollbackRequest{seq: p.seq, logStart: p.logStart})
	p.failPending(err)
}

// doomed says why a group must not commit: the store broke, or a group it
// was planned on failed.
func (c *Committer) doomed(p *plan) error {
	if err := c.failed(); err != nil {
		return err
	}
	if p.epoch <= c.failedEpoch.Load() {
		return fault.New(fault.Unavailable, "an earlier append it depends on failed to commit; retry")
	}
	return nil
}

// errAnsweredUnknown is commitGroup's word that the group's outcome is
// unknown, its appends are answered, and a resolver settles it.
var errAnsweredUnknown = errors.New("commit outcome unknown: answered, resolving")

// commitGroup commits the group's transaction by the group's deadline.
// When the outcome is unknown (no answer in time, or the connection broke
// around COMMIT) it asks Postgres which it was (unknownOutcome).
func (c *Committer) commitGroup(p *plan) error {
	if c.cfg.Hooks.commitFails() {
		p.tx.rollback()
		return commitError(errInjected)
	}
	c.cfg.Hooks.commitSending()
	start := time.Now()
	pid := p.tx.pid()
	err := p.tx.commit(p.deadline)
	c.commitNs.Add(int64(time.Since(start)))
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !pgerr.Unavailable(err) {
		return commitError(err) // the server refused: nothing committed
	}
	if pgconn.SafeToRetry(err) {
		return commitError(err) // COMMIT was never sent (the deadline had passed)
	}
	// No answer in time, the connection broke, or the server ended the
	// session or shut down: the COMMIT may or may not take effect. Ask,
	// never guess.
	return c.unknownOutcome(p, pid, err)
}

// resolution is what a resolver found out about a group's COMMIT.
type resolution struct {
	committed, known bool
}

// unknownOutcome handles a group whose COMMIT was sent but not answered.
// A resolver asks Postgres whether the group committed (resolve). If it
// finds out by the group's deadline, the group is settled as any other:
// published and acknowledged, or failed. Otherwise its appends are
// answered unavailable now, so that no client waits on a Postgres that
// does not answer, and the resolver settles it later:
//
//   - meanwhile the writer refuses every append (unavailable) and the
//     finisher fails every group planned on top of it: none may commit
//     before it is known whether its parents and turn ids did, and no
//     record may be written after its records before it is known whether
//     they stay;
//   - committed: its turns are published (without acknowledgements; an
//     append retried with its idempotency key gets its turn), and the
//     writer cuts the turn log after it;
//   - not committed: the writer cuts the turn log where it started, and
//     forgets its idempotency keys (a retry appends anew).
//
// Its later groups' transactions never commit (their COMMIT is never
// sent), so either way every turn the files keep has its row and no row
// names a turn the files cut.
func (c *Committer) unknownOutcome(p *plan, pid uint32, cause error) error {
	c.dbDown.Store(true)
	found := make(chan resolution, 1)
	c.resolvers.Go(func() { found <- c.resolve(p, pid) })
	timer := time.NewTimer(time.Until(p.deadline))
	defer timer.Stop()
	select {
	case r := <-found:
		switch {
		case r.known && r.committed:
			return nil
		case r.known:
			return commitError(cause)
		}
		return c.fail(fault.Wrap(fault.Unavailable, cause, "commit turns: outcome unknown, restart to reconcile"))
	case <-timer.C:
	}
	c.resolving.Store(true)
	c.failedEpoch.Store(p.epoch)
	c.cfg.Log.Warn("Postgres did not confirm a group's COMMIT in time; answering its appends unavailable and resolving whether it committed",
		"appends", len(p.turns), "first_turn", p.turns[0].id, "err", cause)
	p.failPending(fault.Wrap(fault.Unavailable, cause,
		"commit turns: Postgres did not confirm the commit in time; the append may yet have committed: retry with the same idempotency key"))
	c.resolvers.Go(func() { c.settleLate(p, <-found, cause) })
	return errAnsweredUnknown
}

// settleLate settles a group whose appends were answered before its
// outcome was known (see unknownOutcome), then lets the writer go on.
func (c *Committer) settleLate(p *plan, r resolution, cause error) {
	defer c.resolving.Store(false) // after the rollback request: see write
	defer p.dedup.Leave()
	switch {
	case r.known && r.committed:
		c.cfg.Log.Warn("a group whose COMMIT was not confirmed in time did commit; its turns are published", "appends", len(p.turns), "first_turn", p.turns[0].id)
		c.apply(p, true)
		c.rollback.Store(&rollbackRequest{seq: p.seq + 1, logStart: p.committedEnd()})
	case r.known:
		c.cfg.Log.Warn("a group whose COMMIT was not confirmed in time did not commit", "appends", len(p.turns), "first_turn", p.turns[0].id)
		c.rollback.Store(&rollbackRequest{seq: p.seq, logStart: p.logStart})
	default:
		_ = c.fail(fault.Wrap(fault.Unavailable, cause, "commit turns: outcome unknown at shutdown, restart to reconcile")) // logged; the group's appends get it from the broken committer
	}
}

// resolvingErr is what appends hear while a group's outcome is resolved.
func (c *Committer) resolvingErr() error {
	if c.resolving.Load() {
		return fault.New(fault.Unavailable, "Postgres did not answer an earlier commit in time; writes resume once it answers; retry")
	}
	return nil
}

// commitError is what the clients of a group that did not commit hear:
// unprocessable when Postgres refused the data, unavailable when it could
// not be reached or serve, internal otherwise.
func commitError(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case pgerr.DataError(err):
		return fault.Wrap(fault.Unprocessable, err, "commit turns: Postgres refused the data")
	case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
		return fault.Wrap(fault.Unavailable, err, "commit turns: Postgres did not answer in time; retry")
	case !errors.As(err, &pgErr) || pgerr.Unavailable(err):
		return fault.Wrap(fault.Unavailable, err, "commit turns: database unavailable; retry")
	}
	return fault.Wrap(fault.Internal, err, "commit turns")
}

// resolve finds out whether the group committed, asking Postgres until it
// can tell or the store shuts down (known false).
func (c *Committer) resolve(p *plan, pid uint32) resolution {
	first := p.turns[0]
	tenant := c.cfg.TenantID(first.meta.Tenant)
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		r, err := c.wasCommitted(tenant, first.id, pid)
		if err == nil && r.known {
			return r
		}
		if err != nil {
			c.cfg.Log.Warn("cannot tell whether a group committed; retrying", "err", err, "retry_in", delay)
		}
		select {
		case <-c.quit:
			return resolution{}
		case <-time.After(delay):
		}
	}
}

// wasCommitted asks Postgres whether the group whose first turn is turn
// committed on the session of process pid. Its turn row says it did. Its
// absence says it did not only once that session has ended: until then
// the COMMIT may still sit unread in the session's socket (a stopped
// Postgres, or one that had not read it yet when the connection was
// closed). So the session is looked for first, and the row after: if the
// session had ended by then, no COMMIT of it can come after the look for
// the row.
func (c *Committer) wasCommitted(tenant string, turn uint64, pid uint32) (resolution, error) {
	q := c.queries // each statement bounded by Config.PGTimeout
	ctx := context.Background()
	running, err := q.SessionRunning(ctx, int32(pid))
	if err != nil {
		return resolution{}, err
	}
	exists, err := q.TurnExists(ctx, storedb.TurnExistsParams{TenantID: tenant, TurnID: int64(turn)})
	switch {
	case err != nil:
		return resolution{}, err
	case exists:
		return resolution{committed: true, known: true}, nil
	case !running:
		return resolution{known: true}, nil
	}
	return resolution{}, nil // its session still runs: ask again
}

// publish makes the group visible to reads, then answers it.
func (c *Committer) publish(p *plan) {
	c.apply(p, false)
}

// apply makes a committed group visible to reads, answers it unless late
// (its appends were answered before its outcome was known), and tells
// Config.OnAppend. A late group's tenant may have been forgotten
// meanwhile (store.Engine.ForgetTenant does not wait for it): its
// contexts and types are not brought back.
func (c *Committer) apply(p *plan, late bool) {
	for _, t := range p.turns {
		c.cfg.Index.Turns.Set(t.id, t.meta)
	}
	c.cfg.Index.Turns.Publish(p.maxTurn)
	for _, t := range p.turns {
		if t.jump && (!late || !c.cfg.Index.Gone(t.meta.Tenant)) {
			c.cfg.Index.Contexts.AddJump(t.meta.Tenant, t.contextID, t.meta.Parent)
		}
	}
	for id, s := range p.heads {
		if !late || !c.cfg.Index.Gone(s.Tenant) {
			c.cfg.Index.Contexts.Put(id, s)
		}
	}
	for _, t := range p.newTypes {
		if !late || !c.cfg.Index.Gone(t.tenant) {
			c.cfg.Index.Types.Add(t.tenant, t.ref, t.typeID)
		}
	}
	c.charge(p)
	c.published.Store(p.seq)
	if len(p.turns) > 0 && !late {
		c.dbDown.Store(false)
	}
	c.appends.Add(int64(len(p.turns)))
	c.groups.Add(1)
	if !late {
		p.answer()
	}
	if c.cfg.OnAppend != nil && len(p.turns) > 0 {
		c.cfg.OnAppend(c.appended(p))
	}
}

// appended describes a published group's turns for Config.OnAppend.
func (c *Committer) appended(p *plan) []storetype.Appended {
	out := make([]storetype.Appended, len(p.turns))
	for i, t := range p.turns {
		out[i] = storetype.Appended{
			Tenant: ident.Tenant{ID: c.cfg.TenantID(t.meta.Tenant), No: t.meta.Tenant}, ContextID: t.contextID,
			TurnID: t.id, ParentID: t.meta.Parent, Depth: t.meta.Depth,
			TypeID: t.job.Request.TypeID, TypeVersion: t.meta.TypeVersion, UncompressedLen: t.meta.UncompressedLen,
			CreatedAt: p.now, Keyed: len(t.job.Request.IdempotencyKey) > 0, Payload: t.job.Handed,
		}
	}
	return out
}

// charge charges a committed group's turns and grants to their tenants
// (its new blobs were counted by the pack when they were written).
func (c *Committer) charge(p *plan) {
	if len(p.turns) == 0 && len(p.grants) == 0 {
		return
	}
	var sizes map[usage.Grant]int64 // looked up before the ledger's lock is taken
	if len(p.grants) > 0 {
		sizes = make(map[usage.Grant]int64, len(p.grants))
		for g := range p.grants {
			if entry, ok := c.cfg.Blobs.Lookup(g.Hash); ok {
				sizes[g] = int64(entry.RawLen)
			}
		}
	}
	c.cfg.Usage.ChargeGroup(func(yield func(uint32) bool) {
		for i := range p.turns {
			if !yield(p.turns[i].meta.Tenant) {
				return
			}
		}
	}, sizes)
}
