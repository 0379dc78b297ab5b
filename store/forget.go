package store

import (
	"context"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/internal/groupcommit"
)

// A deleted tenant (tenancy.Admin.DeleteTenant, from any process) has no rows
// left in Postgres, but a running store still knows it: its contexts,
// turns and types in memory, writes in flight. ForgetTenant closes its
// gate and drops what memory holds of it; recovery skips its records.

// admit lets a write of tenant t in; the caller calls e.gate.Leave when
// done (or hands that to a job in flight, see submit). A deleted tenant is
// answered as one that does not exist.
func (e *Engine) admit(t ident.Tenant) error {
	if !e.gate.Enter(t.No) {
		return fault.New(fault.NotFound, "tenant %q not found", t.ID)
	}
	return nil
}

// Admit lets a write of tenant t in from beside the store (the CXDB
// metadata storage): it refuses a deleted tenant as one that does not
// exist, and a tenant's deletion waits for the writes admitted until they
// Leave.
func (e *Engine) Admit(t ident.Tenant) error { return e.admit(t) }

// Leave ends a write Admit let in.
func (e *Engine) Leave() { e.gate.Leave() }

// submit queues j and waits for its outcome, inside the gate the caller
// entered for j's tenant. When ctx ends while j is queued or in flight, j
// may still commit: the gate is then left only once j is answered, so that
// a deletion of the tenant waits for it, and submit reports handedOff (the
// caller must not leave the gate itself).
func (e *Engine) submit(ctx context.Context, j *groupcommit.Job) (o groupcommit.Outcome, handedOff bool) {
	o = e.committer.Submit(ctx, j)
	if !o.Pending {
		return o, false
	}
	go func() {
		defer e.gate.Leave()
		select {
		case <-j.Answered():
		case <-e.committer.Done():
		}
	}()
	return o, true
}

// ForgetTenant makes a running store forget tenant id once it has been
// deleted in Postgres. It waits for the tenant's writes in flight, refuses
// its writes from then on, and drops its contexts, type ids, fs trees and
// cached id, so that every read answers as for a tenant that never
// existed. The entries of its turns in the turn table stay, unreachable,
// until the next start, whose recovery skips its records. Rows the last
// writes added after the deletion are the caller's to purge once this
// returns (auth.Keys.PurgeDeleted). A live tenant is refused (fault.Invalid);
// forgetting a tenant twice does nothing.
func (e *Engine) ForgetTenant(ctx context.Context, id string) (ident.Tenant, error) {
	no, err := e.as(pgrole.Lookup, "").DeletedTenant(ctx, id)
	if isNoRows(err) {
		return ident.Tenant{}, fault.New(fault.Invalid, "tenant %q is not a deleted tenant", id)
	}
	if err != nil {
		return ident.Tenant{}, fault.Wrap(fault.Unavailable, err, "look up deleted tenant %q", id)
	}
	t := ident.Tenant{ID: id, No: uint32(no)}
	if !e.gate.Close(t.No) {
		return t, nil
	}
	e.noteDeadTenant(t.No)
	e.tenants.forget(t)
	e.trees.forget(t.No)
	contexts, turns := e.index.Forget(t.No)
	e.log.Info("forgot a deleted tenant", "tenant", id, "contexts", contexts, "turns", turns)
	return t, nil
}

// Forgotten reports whether the store forgot tenant t (see ForgetTenant).
func (e *Engine) Forgotten(t ident.Tenant) bool { return e.gate.Gone(t.No) }

func (c *tenantCache) forget(t ident.Tenant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, t.ID)
	delete(c.ids, t.No)
}

func (w *wholeTrees) forget(tenant uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.m {
		if k.tenant == tenant {
			delete(w.m, k)
		}
	}
}
