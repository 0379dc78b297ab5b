package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/internal/pgerr"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// finishLoop is the finisher stage: it commits the written groups in order,
// publishes and answers them.
func (c *committer) finishLoop() {
	for p := range c.written {
		c.finish(p)
	}
}

func (c *committer) finish(p *plan) {
	if err := c.doomed(p); err != nil {
		p.tx.rollback()
		p.failPending(err)
		return
	}
	if p.tx != nil {
		if err := c.commitGroup(p); err != nil {
			if KindOf(err) == KindUnavailable {
				c.dbDown.Store(true)
			}
			c.failedEpoch.Store(p.epoch)
			c.rollback.Store(&rollbackRequest{seq: p.seq, logStart: p.logStart})
			p.failPending(err)
			return
		}
		if c.e.opts.hooks.crash(stepCommitted) {
			p.failPending(c.crash())
			return
		}
	}
	c.publish(p)
}

// doomed says why a group must not commit: the store broke, or a group it
// was planned on failed.
func (c *committer) doomed(p *plan) error {
	if err := c.failed(); err != nil {
		return err
	}
	if p.epoch <= c.failedEpoch.Load() {
		return errorf(KindUnavailable, "an earlier append it depends on failed to commit; retry")
	}
	return nil
}

// commitGroup commits the group's transaction. When the outcome is unknown
// (the connection broke around COMMIT) it asks Postgres which it was.
func (c *committer) commitGroup(p *plan) error {
	if c.e.opts.hooks.commitFails() {
		p.tx.rollback()
		return commitError(errInjected)
	}
	start := time.Now()
	err := p.tx.commit()
	c.commitNs.Add(int64(time.Since(start)))
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !pgerr.Unavailable(err) {
		return commitError(err) // the server refused: nothing committed
	}
	// The connection broke, or the server ended the session or shut down:
	// the COMMIT may or may not have happened. Ask, never guess.
	committed, known := c.wasCommitted(p)
	switch {
	case known && committed:
		return nil
	case known:
		return commitError(err)
	default:
		return c.fail(wrapf(KindUnavailable, err, "commit turns: outcome unknown, restart to reconcile"))
	}
}

// commitError is what the clients of a group that did not commit hear:
// unprocessable when Postgres refused the data, unavailable when it could
// not be reached or serve, internal otherwise.
func commitError(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case pgerr.DataError(err):
		return wrapf(KindUnprocessable, err, "commit turns: Postgres refused the data")
	case !errors.As(err, &pgErr) || pgerr.Unavailable(err):
		return wrapf(KindUnavailable, err, "commit turns: database unavailable; retry")
	}
	return wrapf(KindInternal, err, "commit turns")
}

// wasCommitted asks Postgres whether the group's first turn exists,
// retrying while Postgres is unreachable (the pipeline waits meanwhile)
// until it answers or the store shuts down.
func (c *committer) wasCommitted(p *plan) (committed, known bool) {
	first := p.turns[0]
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, err := c.e.as(pgrole.Committer, "").TurnExists(ctx, db.TurnExistsParams{TenantID: first.tenantID(c.e), TurnID: int64(first.id)})
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

// publish makes the group visible to reads, then answers it.
func (c *committer) publish(p *plan) {
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
	c.e.chargeGroup(p)
	c.published.Store(p.seq)
	if len(p.turns) > 0 {
		c.dbDown.Store(false)
	}
	c.appends.Add(int64(len(p.turns)))
	c.groups.Add(1)
	p.answer()
	if c.e.opts.OnAppend != nil && len(p.turns) > 0 {
		c.e.opts.OnAppend(c.appended(p))
	}
}

// appended describes a published group's turns for Options.OnAppend.
func (c *committer) appended(p *plan) []Appended {
	out := make([]Appended, len(p.turns))
	for i, t := range p.turns {
		out[i] = Appended{
			Tenant: Tenant{ID: t.tenantID(c.e), No: t.meta.tenant}, ContextID: t.contextID,
			TurnID: t.id, ParentID: t.meta.parent, Depth: t.meta.depth,
			TypeID: t.job.app.TypeID, TypeVersion: t.meta.typeVersion, UncompressedLen: t.meta.uncompressedLen,
			CreatedAt: p.now, Keyed: len(t.job.app.IdempotencyKey) > 0, Payload: t.job.handed,
		}
	}
	return out
}
