package store

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
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
	n, err := e.as(pgrole.Tenant, t.ID).MarkContextDeleted(ctx, db.MarkContextDeletedParams{TenantID: t.ID, ContextID: int64(id)})
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "delete context %d", id)
	}
	if n == 0 {
		return fault.New(fault.NotFound, "context %d not found", id)
	}
	e.gate.Quiesce(func() { e.contexts.drop(id) })
	e.usage.add(t.No, -ContextCharge)
	e.wakeReaper()
	return nil
}

// drop forgets a deleted context for good: a late put (a commit finishing
// after the deletion) does not bring it back.
func (c *contextTable) drop(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
	if c.deleted == nil {
		c.deleted = map[uint64]struct{}{}
	}
	c.deleted[id] = struct{}{}
}

// deadTurns is the set of turns that died (see reapDeleted). Reads check
// it on every turn lookup, so an empty set costs one atomic load.
type deadTurns struct {
	n atomic.Int64
	m sync.Map // uint64 → struct{}
}

func (d *deadTurns) has(id uint64) bool {
	if d.n.Load() == 0 {
		return false
	}
	_, ok := d.m.Load(id)
	return ok
}

func (d *deadTurns) add(id uint64) {
	if _, loaded := d.m.LoadOrStore(id, struct{}{}); !loaded {
		d.n.Add(1)
	}
}

// Dead reports whether turn id died with the contexts that held it.
func (e *Engine) Dead(id uint64) bool { return e.dead.has(id) }

// loadDeadTurns reads the dead turns before the turn log is loaded, whose
// load then skips their records.
func (e *Engine) loadDeadTurns(ctx context.Context) error {
	ids, err := e.as(pgrole.Recovery, "").ListDeadTurns(ctx)
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "load dead turns")
	}
	for _, id := range ids {
		e.dead.add(uint64(id))
	}
	return nil
}
