package store

import (
	"runtime"
	"testing"

	"github.com/cardboxhq/cardbox/internal/ident"
)

func TestTurnTableAcrossChunks(t *testing.T) {
	tab := newTurnTable()
	ids := []uint64{1, 2, chunkSize - 1, chunkSize, chunkSize + 1, 3*chunkSize + 5}
	for _, id := range ids {
		tab.set(id, turnMeta{parent: id - 1, depth: uint32(id), tenant: 7, hash: ident.Hash{byte(id)}})
	}
	if _, ok := tab.get(ids[0]); ok {
		t.Fatal("a turn is visible before publish")
	}
	tab.publish(ids[len(ids)-1])
	for _, id := range ids {
		m, ok := tab.get(id)
		if !ok || m.parent != id-1 || m.depth != uint32(id) || m.hash != (ident.Hash{byte(id)}) {
			t.Fatalf("get(%d) = %+v, %v", id, m, ok)
		}
	}
	for _, id := range []uint64{0, 3, chunkSize + 2, 3 * chunkSize, 4 * chunkSize, 1 << 40} {
		if m, ok := tab.get(id); ok {
			t.Fatalf("get(%d) found %+v, want nothing", id, m)
		}
	}
	if n := tab.count.Load(); n != int64(len(ids)) {
		t.Fatalf("count = %d", n)
	}
}

// TestTurnTablesAreReleased drops filled tables so that their cleanups
// unmap the chunks while other tables are in use.
func TestTurnTablesAreReleased(t *testing.T) {
	keep := newTurnTable()
	for i := range 20 {
		tab := newTurnTable()
		for id := uint64(1); id < 3*chunkSize; id += chunkSize / 4 {
			tab.set(id, turnMeta{tenant: 1, depth: uint32(i)})
			keep.set(uint64(i)*chunkSize+id, turnMeta{tenant: 2, depth: uint32(id)})
		}
		runtime.GC()
	}
	keep.publish(1 << 30)
	if m, ok := keep.get(19*chunkSize + 1); !ok || m.tenant != 2 || m.depth != 1 {
		t.Fatalf("kept table lost a turn: %+v, %v", m, ok)
	}
}
