package idemindex

import (
	"encoding/binary"
	"sync/atomic"
)

// evicted remembers, approximately, the keys a Table forgot for its cap
// while they are in the window: a Bloom filter, which may say a key it
// never saw was forgotten (about one in 500) but never misses one it saw.
// Without it, once one key of the window was forgotten every keyed append
// had to ask Postgres whether its key was used, for a day; with it only
// the retries of forgotten keys ask, and the few appends the filter
// mistakes for them.
//
// A Bloom filter cannot forget, so the keys go into segments in the order
// they are forgotten (oldest first), each of a fixed number of keys, and a
// segment is dropped once its newest key is out of the window. At most
// maxEvictedSegments segments are kept; beyond that the oldest is dropped
// early and the Table falls back to asking Postgres for every key as old
// as its newest (evictedUntil), as it did for all keys before.
//
// Each segment is blocked: a key sets and tests 8 bits in one 64-byte
// block, so that testing a segment is one cache line. The bits come from
// the Key, a BLAKE3 hash, so nothing more is hashed.
type evicted struct {
	// segs is the segments, oldest first; the slice is never changed
	// once published (the writer publishes a new one), so readers load it
	// without a lock. A segment's bits are only ever set, atomically.
	segs    atomic.Pointer[[]*segment]
	segKeys int // keys a segment takes before the next is started
	blocks  int // 64-byte blocks of a segment: a power of two
}

// maxEvictedSegments bounds the segments of forgotten keys: with the
// default cap, 16 segments of 500,000 keys, 1 MiB each.
const maxEvictedSegments = 16

// evictedBitsPerKey sizes a segment: with 8 bits a key in a 512-bit block,
// about 0.2 % of keys never seen test as seen.
const evictedBitsPerKey = 16

type segment struct {
	words  []uint64 // blocks of 8 words
	keys   int      // keys added; the writer's only
	newest atomic.Int64
}

// init sizes the segments for a Table of at most max keys: each takes
// twice as many.
func (f *evicted) init(max int) {
	f.segKeys, f.blocks = 2*max, 1
	for f.blocks*512 < f.segKeys*evictedBitsPerKey {
		f.blocks *= 2
	}
}

// bits returns the first word of k's block in a segment of blocks blocks
// (a power of two) and the 8 bits k sets in it, as a mask per word.
func bits(k *Key, blocks int) (first int, masks [8]uint64) {
	lo := binary.LittleEndian.Uint64(k[:8])
	hi := binary.LittleEndian.Uint64(k[8:])
	first = int(hi&uint64(blocks-1)) * 8
	for i := range 7 {
		p := (lo >> (9 * i)) & 511
		masks[p>>6] |= 1 << (p & 63)
	}
	p := hi >> 55
	masks[p>>6] |= 1 << (p & 63)
	return first, masks
}

// add remembers k, forgotten at at (unix nanoseconds; keys come oldest
// first). When that drops a segment early, for the bound, it returns the
// newest at of the dropped segment's keys, which the Table no longer
// knows whether it forgot, and true.
func (f *evicted) add(k *Key, at int64) (droppedUntil int64, dropped bool) {
	var segs []*segment
	if p := f.segs.Load(); p != nil {
		segs = *p
	}
	if len(segs) == 0 || segs[len(segs)-1].keys == f.segKeys {
		next := make([]*segment, 0, len(segs)+1)
		if len(segs) == maxEvictedSegments {
			droppedUntil, dropped = segs[0].newest.Load(), true
			segs = segs[1:]
		}
		next = append(append(next, segs...), &segment{words: make([]uint64, 8*f.blocks)})
		f.segs.Store(&next)
		segs = next
	}
	s := segs[len(segs)-1]
	first, masks := bits(k, f.blocks)
	for i, m := range masks {
		if m != 0 {
			atomic.OrUint64(&s.words[first+i], m)
		}
	}
	s.keys++
	s.newest.Store(max(s.newest.Load(), at))
	return droppedUntil, dropped
}

// mayHold reports whether k may have been forgotten after since (unix
// nanoseconds): whether a segment with a key that young has k's bits.
func (f *evicted) mayHold(k *Key, since int64) bool {
	p := f.segs.Load()
	if p == nil {
		return false
	}
	first, masks := bits(k, f.blocks)
	for _, s := range *p {
		if s.newest.Load() <= since {
			continue
		}
		hit := true
		for i, m := range masks {
			if m != 0 && atomic.LoadUint64(&s.words[first+i])&m != m {
				hit = false
				break
			}
		}
		if hit {
			return true
		}
	}
	return false
}

// expire drops the segments whose keys are all at or before until (unix
// nanoseconds): out of the window.
func (f *evicted) expire(until int64) {
	p := f.segs.Load()
	if p == nil {
		return
	}
	segs := *p
	n := 0
	for n < len(segs) && segs[n].newest.Load() <= until {
		n++
	}
	if n > 0 {
		rest := append([]*segment(nil), segs[n:]...)
		f.segs.Store(&rest)
	}
}

// segments returns how many segments the filter holds.
func (f *evicted) segments() int {
	if p := f.segs.Load(); p != nil {
		return len(*p)
	}
	return 0
}
