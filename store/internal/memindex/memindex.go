// Package memindex is the turn store's in-memory index of what is
// committed: every turn's metadata by id, every context's head, and the
// type ids each tenant declared, interned. Reads are served from it
// without touching Postgres or the files; the committer is its only
// writer once recovery has loaded it.
package memindex

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/internal/storetype"
)

// TurnMeta is what reads need of a turn, kept in memory for every
// committed turn (72 bytes each).
type TurnMeta struct {
	Parent          uint64
	Hash            ident.Hash
	Depth           uint32
	Tenant          uint32 // 0 = no such turn (an id burned by a failed group)
	TypeRef         uint32
	TypeVersion     uint32
	Encoding        uint32
	Compression     uint32
	UncompressedLen uint32
}

const (
	chunkBits = 16
	chunkSize = 1 << chunkBits
)

// TurnTable maps turn ids (dense, from 1) to their metadata. Only the
// committer writes; readers see a turn once Visible has passed its id,
// which the committer advances after filling the entries (the atomic
// store orders the writes before it).
//
// Chunks are mapped outside the Go heap where the platform allows (see
// mapTurnChunk); they are released when the table becomes unreachable.
type TurnTable struct {
	chunks   atomic.Pointer[[]*[chunkSize]TurnMeta]
	visible  atomic.Uint64 // highest id readers may look at
	count    atomic.Int64  // turns stored
	mappings *turnMappings
}

// turnMappings holds the memory mappings behind a table's chunks, apart
// from the table, so that the table's cleanup can release them.
type turnMappings struct{ m [][]byte }

// NewTurnTable returns an empty table.
func NewTurnTable() *TurnTable {
	t := &TurnTable{mappings: &turnMappings{}}
	t.chunks.Store(new([]*[chunkSize]TurnMeta))
	runtime.AddCleanup(t, func(ms *turnMappings) {
		for _, m := range ms.m {
			unmapTurnChunk(m)
		}
	}, t.mappings)
	return t
}

// Get returns turn id if it exists and is visible.
func (t *TurnTable) Get(id uint64) (TurnMeta, bool) {
	if id == 0 || id > t.visible.Load() {
		return TurnMeta{}, false
	}
	chunks := *t.chunks.Load()
	c := id >> chunkBits
	if c >= uint64(len(chunks)) {
		return TurnMeta{}, false
	}
	m := chunks[c][id&(chunkSize-1)]
	runtime.KeepAlive(t) // its cleanup unmaps the chunk just read
	return m, m.Tenant != 0
}

// Set stores a turn; the committer calls it before Publish.
func (t *TurnTable) Set(id uint64, m TurnMeta) {
	chunks := *t.chunks.Load()
	c := id >> chunkBits
	for uint64(len(chunks)) <= c {
		grown := append(chunks[:len(chunks):len(chunks)], t.newChunk())
		t.chunks.Store(&grown)
		chunks = grown
	}
	chunks[c][id&(chunkSize-1)] = m
	t.count.Add(1)
	runtime.KeepAlive(t)
}

// newChunk returns a zeroed chunk, mapped if possible, else on the heap.
func (t *TurnTable) newChunk() *[chunkSize]TurnMeta {
	if c, mapping, ok := mapTurnChunk(); ok {
		t.mappings.m = append(t.mappings.m, mapping)
		return c
	}
	return new([chunkSize]TurnMeta)
}

// Publish makes every id up to max visible.
func (t *TurnTable) Publish(max uint64) {
	if max > t.visible.Load() {
		t.visible.Store(max)
	}
}

// Visible is the highest id readers may look at.
func (t *TurnTable) Visible() uint64 { return t.visible.Load() }

// Count is how many turns the table holds.
func (t *TurnTable) Count() int64 { return t.count.Load() }

// Uncount stops counting the tenant's turns and returns how many there
// were. Their entries stay: readers take them without a lock, so only the
// committer writes entries, and only new ones; nothing reaches them once
// the tenant is gone (see Index).
func (t *TurnTable) Uncount(tenant uint32) int64 {
	var n int64
	for id, last := uint64(1), t.visible.Load(); id <= last; id++ {
		if m, ok := t.Get(id); ok && m.Tenant == tenant {
			n++
		}
	}
	t.count.Add(-n)
	return n
}

// OfTenant returns the ids of the tenant's turns the table holds, in
// order.
func (t *TurnTable) OfTenant(tenant uint32) []uint64 {
	var ids []uint64
	for id, last := uint64(1), t.visible.Load(); id <= last; id++ {
		if m, ok := t.Get(id); ok && m.Tenant == tenant {
			ids = append(ids, id)
		}
	}
	return ids
}

// ContextState is a context's tenant and head, and when it was created
// and last appended to (unix ms).
type ContextState struct {
	Tenant  uint32
	Head    uint64
	Depth   uint32
	Created int64
	Updated int64
}

// Info describes context id in this state.
func (s ContextState) Info(id uint64) storetype.ContextInfo {
	return storetype.ContextInfo{
		Head:      storetype.Head{ContextID: id, TurnID: s.Head, Depth: s.Depth},
		CreatedAt: time.UnixMilli(s.Created), UpdatedAt: time.UnixMilli(max(s.Updated, s.Created)),
	}
}

// ContextTable holds every context's head.
type ContextTable struct {
	mu sync.RWMutex
	m  map[uint64]ContextState
	// deleted are the contexts deleted since start (see Drop).
	deleted map[uint64]struct{}
	// jumps are the contexts' jumps (jumps.go), by context.
	jumps map[uint64]jumpSet
}

// NewContextTable returns an empty table.
func NewContextTable() *ContextTable {
	return &ContextTable{m: map[uint64]ContextState{}}
}

// Get returns context id's state.
func (c *ContextTable) Get(id uint64) (ContextState, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.m[id]
	return s, ok
}

// Put stores a context's state; a state without a creation time (a new
// head) keeps the one recorded. A dropped (deleted) context stays gone.
func (c *ContextTable) Put(id uint64, s ContextState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, gone := c.deleted[id]; gone {
		return
	}
	if s.Created == 0 {
		s.Created = c.m[id].Created
	}
	c.m[id] = s
}

// All returns the tenant's contexts.
func (c *ContextTable) All(tenant uint32) []storetype.ContextInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]storetype.ContextInfo, 0, len(c.m))
	for id, s := range c.m {
		if s.Tenant == tenant {
			out = append(out, s.Info(id))
		}
	}
	return out
}

// Len is how many contexts the table holds.
func (c *ContextTable) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// Forget drops the tenant's contexts and returns how many there were.
func (c *ContextTable) Forget(tenant uint32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetTenantJumps(tenant)
	n := 0
	for id, s := range c.m {
		if s.Tenant == tenant {
			delete(c.m, id)
			n++
		}
	}
	return n
}
