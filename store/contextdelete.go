package store

import (
	"context"

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
	row, err := e.as(pgrole.Tenant, t.ID).MarkContextDeleted(ctx, storedb.MarkContextDeletedParams{
		TenantID: t.ID, ContextID: int64(id), Actor: actor, Detail: []byte("{}"),
	})
	if isNoRows(err) {
		return fault.New(fault.NotFound, "context %d not found", id)
	}
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "delete context %d", id)
	}
	// The head is read from memory once every write in flight has
	// committed: no later append moves it.
	var head uint64
	e.gate.Quiesce(func() {
		if s, ok := e.index.Contexts.Get(id); ok {
			head = s.Head
		}
		e.index.Contexts.Drop(id)
	})
	e.usage.Add(t.No, -ContextCharge)
	deleted := storedb.ListUnreapedContextsRow{
		TenantID: t.ID, ContextID: int64(id), BaseTurnID: row.BaseTurnID, RootTurnID: row.RootTurnID, HeadTurnID: int64(head),
	}
	if _, err := e.settle(ctx, t, []storedb.ListUnreapedContextsRow{deleted}); err != nil {
		// The context is deleted all the same; until the reaper has
		// worked its dead turns out (it retries), a fork may still take
		// one, which then lives on in the fork.
		e.log.Warn("work out the dead turns of a deleted context; the reaper will", "tenant", t.ID, "context", id, "err", err)
	}
	e.wakeReaper()
	return nil
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
