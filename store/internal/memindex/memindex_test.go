package memindex

import (
	"runtime"
	"testing"

	"github.com/cardboxhq/cardbox/internal/ident"
)

func TestTurnTableAcrossChunks(t *testing.T) {
	tab := NewTurnTable()
	ids := []uint64{1, 2, chunkSize - 1, chunkSize, chunkSize + 1, 3*chunkSize + 5}
	for _, id := range ids {
		tab.Set(id, TurnMeta{Parent: id - 1, Depth: uint32(id), Tenant: 7, Hash: ident.Hash{byte(id)}})
	}
	if _, ok := tab.Get(ids[0]); ok {
		t.Fatal("a turn is visible before publish")
	}
	tab.Publish(ids[len(ids)-1])
	for _, id := range ids {
		m, ok := tab.Get(id)
		if !ok || m.Parent != id-1 || m.Depth != uint32(id) || m.Hash != (ident.Hash{byte(id)}) {
			t.Fatalf("get(%d) = %+v, %v", id, m, ok)
		}
	}
	for _, id := range []uint64{0, 3, chunkSize + 2, 3 * chunkSize, 4 * chunkSize, 1 << 40} {
		if m, ok := tab.Get(id); ok {
			t.Fatalf("get(%d) found %+v, want nothing", id, m)
		}
	}
	if n := tab.Count(); n != int64(len(ids)) {
		t.Fatalf("count = %d", n)
	}
}

// TestTurnTablesAreReleased drops filled tables so that their cleanups
// unmap the chunks while other tables are in use.
func TestTurnTablesAreReleased(t *testing.T) {
	keep := NewTurnTable()
	for i := range 20 {
		tab := NewTurnTable()
		for id := uint64(1); id < 3*chunkSize; id += chunkSize / 4 {
			tab.Set(id, TurnMeta{Tenant: 1, Depth: uint32(i)})
			keep.Set(uint64(i)*chunkSize+id, TurnMeta{Tenant: 2, Depth: uint32(id)})
		}
		runtime.GC()
	}
	keep.Publish(1 << 30)
	if m, ok := keep.Get(19*chunkSize + 1); !ok || m.Tenant != 2 || m.Depth != 1 {
		t.Fatalf("kept table lost a turn: %+v, %v", m, ok)
	}
}
