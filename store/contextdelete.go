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
// it returns (the gate waits for it), so nothing resurrects it. Which of
// its turns die (those no live context's head reaches) is worked out
// after the answer, by the reaper (see reapDeleted); a crash in between
// loses nothing, since the next start reaps what is left.
func (e *Engine) DeleteContext(ctx context.Context, t ident.Tenant, id uint64) error {
	if _, err := e.contextOf(t, id); err != nil {
		return err
	}
	n, err := e.as(pgrole.Tenant, t.ID).MarkContextDeleted(ctx, storedb.MarkContextDeletedParams{TenantID: t.ID, ContextID: int64(id)})
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "delete context %d", id)
	}
	if n == 0 {
		return fault.New(fault.NotFound, "context %d not found", id)
	}
	e.gate.Quiesce(func() { e.index.Contexts.Drop(id) })
	e.usage.Add(t.No, -ContextCharge)
	e.wakeReaper()
	return nil
}

// Dead reports whether turn id died with the contexts that held it.
func (e *Engine) Dead(id uint64) bool { return e.index.Dead.Has(id) }

// loadDeadTurns reads the dead turns before the turn log is loaded, whose
// load then skips their records.
func (e *Engine) loadDeadTurns(ctx context.Context) error {
	ids, err := e.as(pgrole.Recovery, "").ListDeadTurns(ctx)
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "load dead turns")
	}
	for _, id := range ids {
		e.index.Dead.Add(uint64(id))
	}
	return nil
}
