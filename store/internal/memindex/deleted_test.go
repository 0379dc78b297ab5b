package memindex

import (
	"testing"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/tenantgate"
)

// A dropped context stays gone when a late commit puts its head, and a
// dead turn is hidden from its tenant while the others stay.
func TestDeletedContextsAndDeadTurnsStayHidden(t *testing.T) {
	var gate tenantgate.Gate[uint32]
	x := New(&gate)
	ten := ident.Tenant{ID: "acme", No: 7}
	for id := uint64(1); id <= 3; id++ {
		x.Turns.Set(id, TurnMeta{Parent: id - 1, Depth: uint32(id), Tenant: ten.No})
	}
	x.Turns.Publish(3)
	x.Contexts.Put(10, ContextState{Tenant: ten.No, Head: 3})
	x.Contexts.Put(11, ContextState{Tenant: ten.No, Head: 1})

	x.Contexts.Drop(10)
	x.Contexts.Put(10, ContextState{Tenant: ten.No, Head: 3}) // a commit that finished late
	x.Dead.Add(2)
	x.Dead.Add(3)

	for _, tt := range []struct {
		context uint64
		live    bool
	}{{10, false}, {11, true}} {
		if _, err := x.Context(ten, tt.context); (err == nil) != tt.live {
			t.Errorf("context %d: %v, want live %v", tt.context, err, tt.live)
		}
	}
	for _, tt := range []struct {
		turn    uint64
		visible bool
	}{{1, true}, {2, false}, {3, false}} {
		if _, ok := x.Turn(ten, tt.turn); ok != tt.visible {
			t.Errorf("turn %d visible %v, want %v", tt.turn, ok, tt.visible)
		}
	}
}
