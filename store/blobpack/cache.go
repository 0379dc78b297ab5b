package blobpack

import (
	"hash/crc32"
	"sync"
)

// DefaultCacheBytes is the default Options.CacheBytes.
const DefaultCacheBytes = 16 << 20

const (
	// cacheShards spreads the cache's lock; a power of two.
	cacheShards = 16
	// cacheEntryOverhead is what one cached blob costs beside its bytes
	// (map slot and slice header), counted against the budget.
	cacheEntryOverhead = 96
	// maxCachedBlob is the largest blob the cache keeps: larger ones are
	// rare (file contents, not turns) and would push out many small ones.
	maxCachedBlob = 64 << 10
)

// blobCache keeps the uncompressed bytes of recently read blobs, so that a
// hot blob (the last turns of an active context) is decompressed once, not
// on every read. Blobs are immutable and keyed by their hash, so an entry
// is never stale.
//
// Each shard holds two generations: reads hit either, a hit in the old one
// moves the blob to the new one, and when the new one is full it becomes
// the old one and the previous old one is dropped. This approximates LRU
// with one map operation per hit and bounds each shard to two generations.
//
// Every entry carries the CRC-32C of its bytes, checked on each hit, so a
// served blob is always verified: on disk by its record's CRC, in the cache
// by this one. A mismatch (a caller wrote to shared bytes, or memory went
// bad) drops the entry and the blob is read from the pack again.
type blobCache struct {
	genBytes int // budget of one generation of one shard
	maxBlob  int
	shards   [cacheShards]cacheShard
}

type cacheShard struct {
	mu       sync.Mutex
	cur, old map[Hash]cached
	curBytes int
}

type cached struct {
	data []byte
	crc  uint32
}

// newBlobCache returns a cache of at most about budget bytes, or nil (no
// cache) for a budget too small to be useful.
func newBlobCache(budget int) *blobCache {
	genBytes := budget / cacheShards / 2
	if genBytes < 4<<10 {
		return nil
	}
	c := &blobCache{genBytes: genBytes, maxBlob: min(maxCachedBlob, genBytes/4)}
	for i := range c.shards {
		c.shards[i].cur = map[Hash]cached{}
	}
	return c
}

func (c *blobCache) shard(h *Hash) *cacheShard { return &c.shards[h[0]%cacheShards] }

// get returns the cached bytes of blob h, shared and read-only, after
// checking their CRC.
func (c *blobCache) get(h *Hash) ([]byte, bool) {
	s := c.shard(h)
	s.mu.Lock()
	v, ok := s.cur[*h]
	if !ok {
		if v, ok = s.old[*h]; ok {
			delete(s.old, *h)
			s.add(h, v, c.genBytes)
		}
	}
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	if crc32.Checksum(v.data, castagnoli) != v.crc {
		c.drop(h)
		return nil, false
	}
	return v.data, true
}

// put caches data as blob h. The cache keeps data: the caller must not
// modify it afterwards.
func (c *blobCache) put(h *Hash, data []byte) {
	if len(data) > c.maxBlob {
		return
	}
	v := cached{data: data, crc: crc32.Checksum(data, castagnoli)}
	s := c.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[*h]; !ok {
		delete(s.old, *h)
		s.add(h, v, c.genBytes)
	}
}

// drop forgets blob h.
func (c *blobCache) drop(h *Hash) {
	s := c.shard(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cur, *h)
	delete(s.old, *h)
}

// add puts v into the current generation, first retiring it if it is
// full. The caller holds s.mu and has checked that h is in neither map.
func (s *cacheShard) add(h *Hash, v cached, genBytes int) {
	size := len(v.data) + cacheEntryOverhead
	if s.curBytes+size > genBytes {
		s.old, s.cur, s.curBytes = s.cur, make(map[Hash]cached, len(s.cur)), 0
	}
	s.cur[*h] = v
	s.curBytes += size
}

// bytes returns the bytes the cache holds, overhead included.
func (c *blobCache) bytes() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for _, m := range []map[Hash]cached{s.cur, s.old} {
			for _, v := range m {
				n += len(v.data) + cacheEntryOverhead
			}
		}
		s.mu.Unlock()
	}
	return n
}
