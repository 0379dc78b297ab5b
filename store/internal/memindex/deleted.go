package memindex

import (
	"sync"
	"sync/atomic"
)

// DeadTurns is the set of turns that died with deleted contexts (no live
// context's head reaches them). Index.Turn checks it on every lookup, so
// an empty set costs one atomic load.
type DeadTurns struct {
	n atomic.Int64
	m sync.Map // uint64 → struct{}
}

// Has reports whether turn id died.
func (d *DeadTurns) Has(id uint64) bool {
	if d.n.Load() == 0 {
		return false
	}
	_, ok := d.m.Load(id)
	return ok
}

// Add records that turn id died.
func (d *DeadTurns) Add(id uint64) {
	if _, loaded := d.m.LoadOrStore(id, struct{}{}); !loaded {
		d.n.Add(1)
	}
}

// Drop forgets a deleted context for good: a late Put (a commit that
// finishes after the deletion) does not bring it back.
func (c *ContextTable) Drop(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
	if c.deleted == nil {
		c.deleted = map[uint64]struct{}{}
	}
	c.deleted[id] = struct{}{}
}

// Bury stops counting n turns that died; their entries stay, hidden by
// DeadTurns, as a deleted tenant's do (see Uncount).
func (t *TurnTable) Bury(n int64) { t.count.Add(-n) }
