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
// fixed-size chunks (never copied on growth) plus an 8-byte open-addressing
// slot table kept at most 3/4 full: about 70 MB for a million blobs. Each
// slot holds a 32-bit tag of the key's hash beside the entry number, so a
// probe touches an entry only when the tags match.
//
// It is not safe for concurrent use; Pack guards it with a RWMutex.
// Entries are never removed; a later record of a blob replaces its entry.
type index struct {
	seed   maphash.Seed
	chunks []*[chunkSize]slot
	n      int
	table  []uint64 // 0 = empty, else tag<<32 | (1 + entry number)
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

// hash returns the keyed hash of h: the low bits pick the home position,
// the high 32 bits are the tag.
func (x *index) hash(h *Hash) uint64 { return maphash.Bytes(x.seed, h[:]) }

// find returns the table position holding h, or the empty position where
// h would go; hv is x.hash(h).
func (x *index) find(h *Hash, hv uint64) (pos uint64, found bool) {
	tag := hv >> 32
	for pos = hv & x.mask; ; pos = (pos + 1) & x.mask {
		v := x.table[pos]
		if v == 0 {
			return pos, false
		}
		if v>>32 == tag && x.at(uint32(v)-1).hash == *h {
			return pos, true
		}
	}
}

// lookup returns the entry for h.
func (x *index) lookup(h *Hash) (Entry, bool) {
	pos, ok := x.find(h, x.hash(h))
	if !ok {
		return Entry{}, false
	}
	return x.at(uint32(x.table[pos]) - 1).entry(), true
}

// insert adds e unless its hash is present; it reports whether it did.
// e.Offset must be in [0, maxPackSize].
func (x *index) insert(e *Entry) bool {
	hv := x.hash(&e.Hash)
	pos, found := x.find(&e.Hash, hv)
	if found {
		return false
	}
	if (x.n+1)*4 > len(x.table)*3 {
		x.resize(len(x.table) * 2)
		pos, _ = x.find(&e.Hash, hv)
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
	x.table[pos] = hv>>32<<32 | uint64(i+1)
	x.n++
	return true
}

// replace makes e the entry of its hash, which must be present.
func (x *index) replace(e *Entry) {
	pos, found := x.find(&e.Hash, x.hash(&e.Hash))
	if !found {
		panic("blobpack: replace of an entry not in the index")
	}
	s := x.at(uint32(x.table[pos]) - 1)
	s.offLo, s.offHi = uint32(e.Offset), uint16(e.Offset>>32)
	s.codec, s.rawLen, s.storedLen, s.owner = e.Codec, e.RawLen, e.StoredLen, e.Owner
}

// resize rebuilds the slot table with size positions (a power of two).
func (x *index) resize(size int) {
	x.table = make([]uint64, size)
	x.mask = uint64(size - 1)
	for i := range uint32(x.n) {
		h := &x.at(i).hash
		hv := x.hash(h)
		pos := hv & x.mask
		for x.table[pos] != 0 {
			pos = (pos + 1) & x.mask
		}
		x.table[pos] = hv>>32<<32 | uint64(i+1)
	}
}

// remove takes h's entry out of the index, if there, and reports whether
// it was: a compaction dropped its blob's record. The last entry moves
// into its place, so that entries stay dense, and the slots after its
// position shift back (linear probing without tombstones).
func (x *index) remove(h *Hash) bool {
	pos, found := x.find(h, x.hash(h))
	if !found {
		return false
	}
	i := uint32(x.table[pos]) - 1
	x.table[pos] = 0
	for j := (pos + 1) & x.mask; x.table[j] != 0; j = (j + 1) & x.mask {
		home := x.hash(&x.at(uint32(x.table[j])-1).hash) & x.mask
		// The entry at j may move back to pos if pos lies on its probe
		// path: between its home and j.
		if (j-pos)&x.mask <= (j-home)&x.mask {
			x.table[pos], x.table[j] = x.table[j], 0
			pos = j
		}
	}
	last := uint32(x.n - 1)
	if i != last {
		moved := x.at(last)
		lpos, _ := x.find(&moved.hash, x.hash(&moved.hash))
		*x.at(i) = *moved
		x.table[lpos] = x.table[lpos]>>32<<32 | uint64(i+1)
	}
	*x.at(last) = slot{}
	x.n--
	return true
}
