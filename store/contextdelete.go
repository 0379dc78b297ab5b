package store

import (
	"context"
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
)

// DeleteContext deletes a context of the tenant. From its answer on the
// context answers as one that never existed: reads, appends and forks to
// it are NOT_FOUND, and a write that was in flight has committed before
// it returns (the gate waits for it), so nothing resurrects it. Its turns
// that no live context's head reaches are dead from the answer on too:
// hidden from reads, and no fork or append can take one as its parent.
// Their rows are removed after the answer, by the reaper (see
// ReapDeleted); a crash in between loses nothing, since the next start
// works the dead turns out again before it serves. The audit log records
// the deletion and actor, who asked for it ("key:ID", "retention"), in
// the statement that deletes it.
func (e *Engine) DeleteContext(ctx context.Context, t ident.Tenant, id uint64, actor string) error {
	if _, err := e.contextOf(t, id); err != nil {
		return err
	}
	deleted, err := e.DeleteContexts(ctx, t, []uint64{id}, actor)
	if err == nil && len(deleted) == 0 {
		return fault.New(fault.NotFound, "context %d not found", id)
	}
	return err
}

// DeleteContexts deletes contexts of the tenant as DeleteContext deletes
// each, all at once: one statement, one pause of the write gate and one
// working out of their dead turns for all of them, where DeleteContext
// for each would pause every tenant's writes twice per context. It
// returns the ids it deleted, in order; an id that names no live context
// of the tenant is left out.
func (e *Engine) DeleteContexts(ctx context.Context, t ident.Tenant, ids []uint64, actor string) ([]uint64, error) {
	return e.deleteContexts(ctx, t, ids, nil, actor)
}

// DeleteExpiredContexts deletes contexts of the tenant that
// ExpiredContexts listed as DeleteContexts does, but leaves out those only
// idle that were appended to since they were listed: no longer idle, they
// are not expired.
func (e *Engine) DeleteExpiredContexts(ctx context.Context, t ident.Tenant, expired []ExpiredContext, actor string) ([]uint64, error) {
	ids := make([]uint64, len(expired))
	var idle []ExpiredContext
	for i, c := range expired {
		ids[i] = c.ContextID
		if !c.IdleSince.IsZero() {
			idle = append(idle, c)
		}
	}
	return e.deleteContexts(ctx, t, ids, idle, actor)
}

// deleteContexts is DeleteContexts, sparing the contexts of idle appended
// to since their IdleSince.
func (e *Engine) deleteContexts(ctx context.Context, t ident.Tenant, ids []uint64, idle []ExpiredContext, actor string) ([]uint64, error) {
	live := make([]int64, 0, len(ids))
	for _, id := range ids {
		if _, err := e.contextOf(t, id); err == nil {
			live = append(live, int64(id))
		}
	}
	if len(live) == 0 {
		return nil, nil
	}
	// From the mark in Postgres until their dead turns are worked out,
	// the contexts are deleted there but live in memory: a reaper listing
	// them then would reap them as it found them (spare what they reach,
	// or miss an append still committing) and mark them reaped, and the
	// turns this deletion then hides would never be buried. The reaper
	// leaves them to its next pass, which the end of this one wakes.
	end := e.deleting.Begin()
	defer e.wakeReaper() // after end: deferred calls run last first
	defer end()
	mark := storedb.MarkContextsDeletedParams{
		TenantID: t.ID, ContextIds: live, Actor: actor, Detail: []byte("{}"),
		IdleContextIds: make([]int64, len(idle)), IdleUpdatedAts: make([]time.Time, len(idle)),
	}
	for i, c := range idle {
		mark.IdleContextIds[i], mark.IdleUpdatedAts[i] = int64(c.ContextID), c.IdleSince
	}
	rows, err := e.as(pgrole.Tenant, t.ID).MarkContextsDeleted(ctx, mark)
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "delete %d contexts", len(live))
	}
	if e.opts.afterMarkDeleted != nil {
		e.opts.afterMarkDeleted()
	}
	if len(rows) == 0 {
		return nil, nil
	}
	// The heads are read from memory once every write in flight has
	// committed: no later append moves them.
	deleted := make([]storedb.ListUnreapedContextsRow, len(rows))
	out := make([]uint64, len(rows))
	e.gate.Quiesce(func() {
		for i, r := range rows {
			var head uint64
			if s, ok := e.index.Contexts.Get(uint64(r.ContextID)); ok {
				head = s.Head
			}
			e.index.Contexts.Drop(uint64(r.ContextID))
			deleted[i] = storedb.ListUnreapedContextsRow{
				TenantID: t.ID, ContextID: r.ContextID, BaseTurnID: r.BaseTurnID, RootTurnID: r.RootTurnID, HeadTurnID: int64(head),
			}
			out[i] = uint64(r.ContextID)
		}
	})
	e.usage.Add(t.No, -ContextCharge*int64(len(rows)))
	if _, err := e.settle(ctx, t, deleted); err != nil {
		// The contexts are deleted all the same; until the reaper has
		// worked their dead turns out (it retries), a fork may still take
		// one, which then lives on in the fork.
		e.log.Warn("work out the dead turns of deleted contexts; the reaper will", "tenant", t.ID, "contexts", len(out), "err", err)
	}
	return out, nil
}

// Dead reports whether turn id died with the contexts that held it.
func (e *Engine) Dead(id uint64) bool { return e.index.Dead.Has(id) }

// loadDeadTurns reads the dead turns before the turn log is loaded, whose
// load then skips their records.
func (e *Engine) loadDeadTurns(ctx context.Context) error {
	rows, err := e.as(pgrole.Recovery, "").ListDeadTurnsDied(ctx)
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "load dead turns")
	}
	for _, r := range rows {
		e.index.Dead.Add(uint64(r.TurnID))
		e.deaths.Turn(uint64(r.TurnID), r.DiedAt)
	}
	e.deaths.Sorted()
	return nil
}
