package cardbox

import (
	"hash/maphash"
	"strings"
	"sync"
)

// DefaultCardCacheBytes is the card cache's budget when
// Options.CardCacheBytes is 0.
const DefaultCardCacheBytes = 64 << 20

const (
	// cacheShards splits the cache so that concurrent reads rarely wait
	// for one another's lock.
	cacheShards = 16
	// entryOverhead is what an entry costs beyond its key and JSON bytes:
	// the entry struct and its map slot, roughly.
	entryOverhead = 128
)

// cardCache holds the JSON of cards by project and card id, up to a byte
// budget, evicting the least recently used cards first. It is safe for
// concurrent use.
//
// A card's JSON never changes while the card lives: cards are immutable and
// reads never return deleted ones. An id can name a new card only after
// the old one was purged, and the new card has a later created_at, so each
// entry carries the card's created_at (its version) and a lookup for
// another version misses. The cache says nothing about liveness: callers
// check that in Postgres first.
type cardCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

// cacheKey names a card; the project makes every entry one tenant's.
type cacheKey struct{ project, card string }

// cacheEntry is a cached card and its place in its shard's LRU list.
type cacheEntry struct {
	key        cacheKey
	version    int64 // created_at in Unix microseconds
	json       []byte
	size       int64
	prev, next *cacheEntry
}

// cacheShard is an LRU list of entries under one lock.
type cacheShard struct {
	mu sync.Mutex
	m  map[cacheKey]*cacheEntry
	// lru is the list's sentinel: lru.next is the most recently used
	// entry, lru.prev the least.
	lru   cacheEntry
	used  int64
	limit int64
}

// newCardCache returns a cache of at most maxBytes (split evenly among the
// shards), or nil when maxBytes is not positive.
func newCardCache(maxBytes int64) *cardCache {
	if maxBytes <= 0 {
		return nil
	}
	c := &cardCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.m = make(map[cacheKey]*cacheEntry)
		sh.lru.prev, sh.lru.next = &sh.lru, &sh.lru
		sh.limit = maxBytes / cacheShards
	}
	return c
}

func (c *cardCache) shard(k cacheKey) *cacheShard {
	return &c.shards[maphash.Comparable(c.seed, k)%cacheShards]
}

// get returns the JSON of the card at version, or nil. The bytes are
// shared: callers must not modify them.
func (c *cardCache) get(project, card string, version int64) []byte {
	k := cacheKey{project, card}
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[k]
	if e == nil || e.version != version {
		return nil
	}
	sh.unlink(e)
	sh.pushFront(e)
	return e.json
}

// put stores the JSON of the card at version, replacing any other version,
// and evicts the least recently used entries beyond the budget. It keeps
// json, which the caller must not modify afterwards. A card larger than a
// shard's budget is not cached.
func (c *cardCache) put(project, card string, version int64, json []byte) {
	size := int64(len(project)+len(card)+cap(json)) + entryOverhead
	k := cacheKey{project, card}
	sh := c.shard(k)
	if size > sh.limit {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old := sh.m[k]; old != nil {
		sh.remove(old)
	}
	// Own copies of the key: the caller's strings may share memory with
	// a request or a row we should not keep alive.
	e := &cacheEntry{
		key:     cacheKey{strings.Clone(project), strings.Clone(card)},
		version: version, json: json, size: size,
	}
	sh.m[e.key] = e
	sh.pushFront(e)
	sh.used += size
	for sh.used > sh.limit {
		sh.remove(sh.lru.prev)
	}
}

// drop forgets a card, whatever its version.
func (c *cardCache) drop(project, card string) {
	k := cacheKey{project, card}
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[k]; e != nil {
		sh.remove(e)
	}
}

// stats returns the number of entries and the bytes they are charged.
func (c *cardCache) stats() (entries int, bytes int64) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		entries += len(sh.m)
		bytes += sh.used
		sh.mu.Unlock()
	}
	return entries, bytes
}

func (sh *cacheShard) remove(e *cacheEntry) {
	sh.unlink(e)
	delete(sh.m, e.key)
	sh.used -= e.size
}

func (sh *cacheShard) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (sh *cacheShard) pushFront(e *cacheEntry) {
	e.prev, e.next = &sh.lru, sh.lru.next
	sh.lru.next.prev = e
	sh.lru.next = e
}
