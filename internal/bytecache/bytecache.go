// Package bytecache is an in-memory LRU cache of byte slices (rendered
// JSON, typically) bounded by the bytes it holds, for values that are
// expensive to build and never change for a given key and version.
//
// Each entry carries a version chosen by the caller (a creation time, a
// generation): a lookup for another version misses, and storing a new
// version replaces the old one. That lets callers cache things whose key
// can come to name new content (an id reused after a purge, a registry
// that grew) without telling the cache: they look up with the version
// they know to be current, and a stale entry is never returned.
package bytecache

import (
	"hash/maphash"
	"sync"
	"unsafe"
)

// shards splits the cache so that concurrent readers rarely wait for one
// another's lock.
const shards = 16

// Cache is a sharded LRU of byte slices up to a byte budget; safe for
// concurrent use. The budget is split evenly among the shards, each
// evicting its least recently used entries beyond its share.
//
// A nil *Cache is a cache that holds nothing: Get misses and the other
// methods do nothing, so a caller can turn caching off with a zero budget
// and no checks of its own.
type Cache[K comparable] struct {
	seed maphash.Seed
	// overhead is what an entry is charged beyond its key's and value's
	// bytes (entryOverhead). Charging it keeps a cache of many small
	// values within its budget in real memory too.
	overhead int64
	shards   [shards]shard[K]
}

// entryOverhead is, roughly, the memory of an entry beyond the bytes its
// key and value point to: the entry struct and its map slot (a copy of the
// key and a pointer). It depends on K; for a key of two strings it is 136
// bytes.
func entryOverhead[K comparable]() int64 {
	var e entry[K]
	return int64(unsafe.Sizeof(e) + unsafe.Sizeof(e.key) + unsafe.Sizeof(&e))
}

// entry is a cached value and its place in its shard's LRU list.
type entry[K comparable] struct {
	key        K
	version    int64
	stamp      uint64 // the caller's, see SetStamp; 0 when put
	value      []byte
	size       int64
	prev, next *entry[K]
}

// shard is an LRU list of entries under one lock.
type shard[K comparable] struct {
	mu sync.Mutex
	m  map[K]*entry[K]
	// lru is the list's sentinel: lru.next is the most recently used
	// entry, lru.prev the least.
	lru   entry[K]
	used  int64
	limit int64
}

// New returns a cache of at most maxBytes, or nil (a cache that holds
// nothing) when maxBytes is not positive.
func New[K comparable](maxBytes int64) *Cache[K] {
	if maxBytes <= 0 {
		return nil
	}
	c := &Cache[K]{seed: maphash.MakeSeed(), overhead: entryOverhead[K]()}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.m = make(map[K]*entry[K])
		sh.lru.prev, sh.lru.next = &sh.lru, &sh.lru
		sh.limit = maxBytes / shards
	}
	return c
}

func (c *Cache[K]) shard(k K) *shard[K] {
	return &c.shards[maphash.Comparable(c.seed, k)%shards]
}

// Get returns the value of k at version, or nil when k is not cached or
// is cached at another version. The bytes are shared with the cache and
// other callers: callers must not modify them.
func (c *Cache[K]) Get(k K, version int64) []byte {
	if c == nil {
		return nil
	}
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[k]
	if e == nil || e.version != version {
		return nil
	}
	sh.unlink(e)
	sh.pushFront(e)
	return e.value
}

// Peek returns the value of k whatever its version, with its version and
// stamp (see SetStamp); v is nil when k is not cached. Like Get, it marks
// the entry recently used, and the bytes must not be modified.
func (c *Cache[K]) Peek(k K) (v []byte, version int64, stamp uint64) {
	if c == nil {
		return nil, 0, 0
	}
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[k]
	if e == nil {
		return nil, 0, 0
	}
	sh.unlink(e)
	sh.pushFront(e)
	return e.value, e.version, e.stamp
}

// SetStamp records stamp on k's entry if it is cached at version. A stamp
// is the caller's note of when the entry was last known to be current (a
// generation it checks against elsewhere); Put leaves it 0.
func (c *Cache[K]) SetStamp(k K, version int64, stamp uint64) {
	if c == nil {
		return
	}
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[k]; e != nil && e.version == version {
		e.stamp = stamp
	}
}

// Put stores v as the value of k at version, replacing any other version
// of k, and evicts the least recently used entries beyond the budget. The
// cache keeps v and k: the caller must not modify v afterwards, and should
// pass a k that shares no memory it does not want kept alive (clone
// strings cut from a request or a row).
//
// keyBytes is what k holds beyond its struct, such as the lengths of its
// strings; the entry is charged that, cap(v) (the memory v keeps alive)
// and the memory of the entry itself. A value whose charge exceeds
// a shard's budget is not cached: it could never fit.
func (c *Cache[K]) Put(k K, version int64, v []byte, keyBytes int) {
	if c == nil {
		return
	}
	size := int64(keyBytes) + int64(cap(v)) + c.overhead
	sh := c.shard(k)
	if size > sh.limit {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old := sh.m[k]; old != nil {
		sh.remove(old)
	}
	e := &entry[K]{key: k, version: version, value: v, size: size}
	sh.m[k] = e
	sh.pushFront(e)
	sh.used += size
	for sh.used > sh.limit {
		sh.remove(sh.lru.prev)
	}
}

// Drop forgets k, whatever its version, so that the memory of a value
// known to be dead comes back at once rather than when it is evicted.
func (c *Cache[K]) Drop(k K) {
	if c == nil {
		return
	}
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[k]; e != nil {
		sh.remove(e)
	}
}

// DropIf forgets every key for which match reports true (a deleted
// tenant's, say) and returns how many it forgot. It holds one shard's
// lock at a time while it calls match on that shard's keys.
func (c *Cache[K]) DropIf(match func(K) bool) int {
	if c == nil {
		return 0
	}
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if match(k) {
				sh.remove(e)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// Stats returns the number of entries and the bytes they are charged. The
// shards are read one after another, so under concurrent use the totals
// are approximate.
func (c *Cache[K]) Stats() (entries int, bytes int64) {
	if c == nil {
		return 0, 0
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		entries += len(sh.m)
		bytes += sh.used
		sh.mu.Unlock()
	}
	return entries, bytes
}

func (sh *shard[K]) remove(e *entry[K]) {
	sh.unlink(e)
	delete(sh.m, e.key)
	sh.used -= e.size
}

func (sh *shard[K]) unlink(e *entry[K]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (sh *shard[K]) pushFront(e *entry[K]) {
	e.prev, e.next = &sh.lru, sh.lru.next
	sh.lru.next.prev = e
	sh.lru.next = e
}
