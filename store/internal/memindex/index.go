package memindex

import (
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/tenantgate"
)

// Index is the store's memory as each tenant sees it: the three tables,
// and the tenant gate, whose closed tenants (deleted ones) have no
// contexts or turns left to see.
type Index struct {
	Turns    *TurnTable
	Contexts *ContextTable
	Types    *TypeTable
	// Dead are the turns that died with deleted contexts: hidden like a
	// deleted tenant's.
	Dead DeadTurns
	gate *tenantgate.Gate[uint32]
}

// New returns an empty index that hides the tenants gate closes.
func New(gate *tenantgate.Gate[uint32]) *Index {
	return &Index{Turns: NewTurnTable(), Contexts: NewContextTable(), Types: NewTypeTable(), gate: gate}
}

// Gone reports whether tenant was deleted (its gate is closed).
func (x *Index) Gone(tenant uint32) bool { return x.gate.Gone(tenant) }

// Context returns the tenant's context, or fault.NotFound (also for
// another tenant's context: its existence is not revealed; and for a
// deleted tenant's).
func (x *Index) Context(t ident.Tenant, id uint64) (ContextState, error) {
	s, ok := x.Contexts.Get(id)
	if !ok || s.Tenant != t.No || x.gate.Gone(t.No) {
		return ContextState{}, fault.New(fault.NotFound, "context %d not found", id)
	}
	return s, nil
}

// Turn returns the tenant's committed turn, unless it died.
func (x *Index) Turn(t ident.Tenant, id uint64) (TurnMeta, bool) {
	m, ok := x.Turns.Get(id)
	if !ok || m.Tenant != t.No || x.gate.Gone(t.No) || x.Dead.Has(id) {
		return TurnMeta{}, false
	}
	return m, true
}

// Forget drops a deleted tenant's contexts and type ids and stops
// counting its turns (see TurnTable.Uncount); it returns how many
// contexts and turns it had.
func (x *Index) Forget(tenant uint32) (contexts int, turns int64) {
	x.Types.Forget(tenant)
	return x.Contexts.Forget(tenant), x.Turns.Uncount(tenant)
}
