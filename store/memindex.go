package store

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cardboxhq/cardbox/internal/ident"
)

// turnMeta is what reads need of a turn, kept in memory for every committed
// turn (72 bytes each).
type turnMeta struct {
	parent          uint64
	hash            ident.Hash
	depth           uint32
	tenant          uint32 // 0 = no such turn (an id burned by a failed group)
	typeRef         uint32
	typeVersion     uint32
	encoding        uint32
	compression     uint32
	uncompressedLen uint32
}

const (
	chunkBits = 16
	chunkSize = 1 << chunkBits
)

// turnTable maps turn ids (dense, from 1) to their metadata. Only the
// committer writes; readers see a turn once visible has passed its id, which
// the committer advances after filling the entries (the atomic store orders
// the writes before it).
//
// Chunks are mapped outside the Go heap where the platform allows (see
// mapTurnChunk); they are released when the table becomes unreachable.
type turnTable struct {
	chunks   atomic.Pointer[[]*[chunkSize]turnMeta]
	visible  atomic.Uint64 // highest id readers may look at
	count    atomic.Int64  // turns stored
	mappings *turnMappings
}

// turnMappings holds the memory mappings behind a table's chunks, apart
// from the table, so that the table's cleanup can release them.
type turnMappings struct{ m [][]byte }

func newTurnTable() *turnTable {
	t := &turnTable{mappings: &turnMappings{}}
	t.chunks.Store(new([]*[chunkSize]turnMeta))
	runtime.AddCleanup(t, func(ms *turnMappings) {
		for _, m := range ms.m {
			unmapTurnChunk(m)
		}
	}, t.mappings)
	return t
}

// get returns turn id if it exists and is visible.
func (t *turnTable) get(id uint64) (turnMeta, bool) {
	if id == 0 || id > t.visible.Load() {
		return turnMeta{}, false
	}
	chunks := *t.chunks.Load()
	c := id >> chunkBits
	if c >= uint64(len(chunks)) {
		return turnMeta{}, false
	}
	m := chunks[c][id&(chunkSize-1)]
	runtime.KeepAlive(t) // its cleanup unmaps the chunk just read
	return m, m.tenant != 0
}

// set stores a turn; the committer calls it before publish.
func (t *turnTable) set(id uint64, m turnMeta) {
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
func (t *turnTable) newChunk() *[chunkSize]turnMeta {
	if c, mapping, ok := mapTurnChunk(); ok {
		t.mappings.m = append(t.mappings.m, mapping)
		return c
	}
	return new([chunkSize]turnMeta)
}

// publish makes every id up to max visible.
func (t *turnTable) publish(max uint64) {
	if max > t.visible.Load() {
		t.visible.Store(max)
	}
}

// contextState is a context's tenant and head, and when it was created and
// last appended to (unix ms).
type contextState struct {
	tenant  uint32
	head    uint64
	depth   uint32
	created int64
	updated int64
}

// contextTable holds every context's head.
type contextTable struct {
	mu sync.RWMutex
	m  map[uint64]contextState
	// deleted are the contexts deleted since start (see drop).
	deleted map[uint64]struct{}
}

func (c *contextTable) get(id uint64) (contextState, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.m[id]
	return s, ok
}

// put stores a context's state; a state without a creation time (a new
// head) keeps the one recorded.
func (c *contextTable) put(id uint64, s contextState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, gone := c.deleted[id]; gone {
		return
	}
	if s.created == 0 {
		s.created = c.m[id].created
	}
	c.m[id] = s
}

// all returns the tenant's contexts.
func (c *contextTable) all(tenant uint32) []ContextInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]ContextInfo, 0, len(c.m))
	for id, s := range c.m {
		if s.tenant == tenant {
			out = append(out, s.info(id))
		}
	}
	return out
}

func (c *contextTable) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// typeKey names a declared type id within a tenant.
type typeKey struct {
	tenant uint32
	typeID string
}

// refKey names an interned type by its compact number.
type refKey struct {
	tenant uint32
	ref    uint32
}

// typeTable interns declared type ids per tenant; the numbers are recorded
// in the turn log and in the turn_types table.
type typeTable struct {
	mu     sync.RWMutex
	refs   map[typeKey]uint32
	names  map[refKey]string
	latest map[uint32]uint32 // highest ref per tenant
}

func newTypeTable() *typeTable {
	return &typeTable{refs: map[typeKey]uint32{}, names: map[refKey]string{}, latest: map[uint32]uint32{}}
}

func (t *typeTable) ref(tenant uint32, typeID string) (uint32, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.refs[typeKey{tenant, typeID}]
	return r, ok
}

func (t *typeTable) name(tenant, ref uint32) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.names[refKey{tenant, ref}]
}

func (t *typeTable) add(tenant, ref uint32, typeID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refs[typeKey{tenant, typeID}] = ref
	t.names[refKey{tenant, ref}] = typeID
	if ref > t.latest[tenant] {
		t.latest[tenant] = ref
	}
}

func (t *typeTable) next(tenant uint32) uint32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.latest[tenant] + 1
}
