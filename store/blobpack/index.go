package blobpack

import "hash/maphash"

// maxPackSize bounds pack offsets so they fit the 48 bits of a slot.
const maxPackSize = 1<<48 - 1

const (
	chunkBits = 12
	chunkSize = 1 << chunkBits
)

// slot is the compact in-memory form of an Entry: 52 bytes, no pointers.
type slot struct {
	hash      Hash
	offLo     uint32
	offHi     uint16
	codec     Codec
	_         uint8
	rawLen    uint32
	storedLen uint32
	owner     uint32
}

func (s *slot) entry() Entry {
	return Entry{
		Hash:      s.hash,
		Offset:    int64(s.offHi)<<32 | int64(s.offLo),
		RawLen:    s.rawLen,
		StoredLen: s.storedLen,
		Owner:     s.owner,
		Codec:     s.codec,
	}
}

// index maps hashes to entries. A Go map[Hash]Entry costs about 120 bytes
// per entry at its worst load factor; this costs 52 bytes per entry in
// fixed-size chunks (never copied on growth) plus a 4-byte open-addressing
// slot table kept at most 3/4 full: about 60 MB for a million blobs.
//
// It is not safe for concurrent use; Pack guards it with a RWMutex.
// Entries are never removed.
type index struct {
	seed   maphash.Seed
	chunks []*[chunkSize]slot
	n      int
	table  []uint32 // 0 = empty, else 1 + position in chunks
	mask   uint64
}

func newIndex(sizeHint int) *index {
	x := &index{seed: maphash.MakeSeed()}
	x.resize(tableSizeFor(sizeHint))
	return x
}

// tableSizeFor returns the power-of-two table size that holds n entries
// at a load factor of at most 3/4.
func tableSizeFor(n int) int {
	size := 64
	for size/4*3 < n {
		size *= 2
	}
	return size
}

func (x *index) len() int { return x.n }

func (x *index) at(i uint32) *slot { return &x.chunks[i>>chunkBits][i&(chunkSize-1)] }

func (x *index) home(h *Hash) uint64 { return maphash.Bytes(x.seed, h[:]) & x.mask }

// find returns the table position holding h, or the empty position where
// h would go.
func (x *index) find(h *Hash) (pos uint64, found bool) {
	for pos = x.home(h); ; pos = (pos + 1) & x.mask {
		v := x.table[pos]
		if v == 0 {
			return pos, false
		}
		if x.at(v-1).hash == *h {
			return pos, true
		}
	}
}

// lookup returns the entry for h.
func (x *index) lookup(h *Hash) (Entry, bool) {
	pos, ok := x.find(h)
	if !ok {
		return Entry{}, false
	}
	return x.at(x.table[pos] - 1).entry(), true
}

// insert adds e unless its hash is present; it reports whether it did.
// e.Offset must be in [0, maxPackSize].
func (x *index) insert(e *Entry) bool {
	pos, found := x.find(&e.Hash)
	if found {
		return false
	}
	if (x.n+1)*4 > len(x.table)*3 {
		x.resize(len(x.table) * 2)
		pos, _ = x.find(&e.Hash)
	}
	i := uint32(x.n)
	if int(i>>chunkBits) == len(x.chunks) {
		x.chunks = append(x.chunks, new([chunkSize]slot))
	}
	*x.at(i) = slot{
		hash:      e.Hash,
		offLo:     uint32(e.Offset),
		offHi:     uint16(e.Offset >> 32),
		codec:     e.Codec,
		rawLen:    e.RawLen,
		storedLen: e.StoredLen,
		owner:     e.Owner,
	}
	x.table[pos] = i + 1
	x.n++
	return true
}

// resize rebuilds the slot table with size positions (a power of two).
func (x *index) resize(size int) {
	x.table = make([]uint32, size)
	x.mask = uint64(size - 1)
	for i := range uint32(x.n) {
		pos, _ := x.find(&x.at(i).hash)
		x.table[pos] = i + 1
	}
}
