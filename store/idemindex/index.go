// Package idemindex is the turn store's in-memory index of recent
// idempotency keys: which turn a key of a tenant's context produced, when,
// and in which group, for the last Window, up to a cap. Postgres keeps
// every key of the window and answers for those the cap forgot (see
// Table.MayMiss). The store's committer is its only writer.
package idemindex

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/zeebo/blake3"
)

// Window is how long a repeated idempotency key returns the
// original turn.
const Window = 24 * time.Hour

// DefaultMax is the default cap of a Table (the store's
// Options.MaxIdempotencyKeys).
const DefaultMax = 250_000

// Key names an idempotency key within a tenant's context: a hash of
// the three, so that an entry's size does not depend on what clients send.
type Key [16]byte

// NewKey returns the Key of key in tenant's context.
func NewKey(tenant uint32, contextID uint64, key []byte) Key {
	var buf [128]byte
	b := binary.LittleEndian.AppendUint32(buf[:0], tenant)
	b = binary.LittleEndian.AppendUint64(b, contextID)
	h := blake3.Sum256(append(b, key...))
	return Key(h[:16])
}

// home is where a key's search starts in an index of mask+1 positions.
func (k *Key) home(mask int) int {
	return int(binary.LittleEndian.Uint64(k[:8])) & mask
}

// Entry is the turn a key produced, when, in which group (0 for keys
// loaded at start), and the parent its append asked for (as sent, 0 for
// the head; unknown for keys stored before that was recorded).
type Entry struct {
	Turn        uint64
	At          time.Time
	Seq         uint64
	Parent      uint64
	ParentKnown bool
}

// ringSlot is an Entry as the table holds it (48 bytes, no pointers).
type ringSlot struct {
	key  Key
	turn uint64 // 0: a dead slot (its key was added again, or forgotten)
	at   int64  // unix nanoseconds
	seq  uint64
	// parent is the parent as sent plus one; 0: unknown.
	parent uint64
}

func (s *ringSlot) entry() Entry {
	return Entry{
		Turn: s.turn, At: time.Unix(0, s.at), Seq: s.seq,
		Parent: max(s.parent, 1) - 1, ParentKnown: s.parent != 0,
	}
}

func slotOf(k Key, e Entry) ringSlot {
	s := ringSlot{key: k, turn: e.Turn, at: e.At.UnixNano(), seq: e.Seq}
	if e.ParentKnown {
		s.parent = e.Parent + 1
	}
	return s
}

// Table remembers the keys of the last Window, including
// those of groups still in flight, up to a cap: beyond it the oldest are
// forgotten, and Postgres, which keeps every key for the window, answers
// for them (the store's replay from Postgres). Only the committer's writer
// stage reads and writes it, except MayMiss.
//
// Keys come in time order and leave oldest first (for the cap, or
// expired), so the entries are a ring of slots, oldest first, with an
// open-addressing index of ring positions by key: at most 64 bytes a key
// (a 48-byte slot, and two to four index positions of 4 bytes), no
// pointers, mapped outside the Go heap where the platform allows (see
// mapTable), and touched only as keys come. A Go map of the keys and
// a list of them in time order took over 250 bytes a key, and, on the
// heap, let as much again of garbage gather before a collection.
type Table struct {
	// ring holds the entries numbered first up to next (not included),
	// at most max of them: entry a is ring[a%max]. Numbers only grow, but
	// for the start-up load, which adds older entries below first.
	ring        []ringSlot
	first, next uint64
	// index holds ring positions plus one (0: free), with linear probing
	// from each key's home; its length is a power of two at least twice
	// the ring's.
	index []uint32
	held  int // live slots
	max   int
	// evictedUntil is the newest at (unix nanoseconds) of an entry
	// forgotten for the cap, or left in Postgres for it at start-up (then
	// the oldest at loaded, which no key left there is newer than): keys
	// of that age or younger may be missing.
	evictedUntil atomic.Int64
	// loadedRows is how many keys the start-up load read from Postgres.
	loadedRows int
}

// firstEntry numbers the first entry, leaving room below it for the
// start-up load.
const firstEntry = 1 << 62

// New returns an empty table of at most max keys (DefaultMax when not
// positive).
func New(max int) *Table {
	if max <= 0 {
		max = DefaultMax
	}
	max = min(max, math.MaxInt32/4)
	positions := 1
	for positions < 2*max {
		positions *= 2
	}
	t := &Table{max: max, first: firstEntry, next: firstEntry}
	if ring, index, mapping, ok := mapTable(max, positions); ok {
		t.ring, t.index = ring, index
		runtime.AddCleanup(t, unmapTable, mapping)
	} else {
		t.ring, t.index = make([]ringSlot, max), make([]uint32, positions)
	}
	return t
}

// The methods below keep t alive (runtime.KeepAlive) while they use its
// slots: its cleanup unmaps them.

func (t *Table) slot(a uint64) *ringSlot { return &t.ring[a%uint64(t.max)] }

// find returns the index position of k's live entry, or false.
func (t *Table) find(k *Key) (int, bool) {
	mask := len(t.index) - 1
	for i := k.home(mask); ; i = (i + 1) & mask {
		p := t.index[i]
		if p == 0 {
			return 0, false
		}
		if t.ring[p-1].key == *k {
			return i, true
		}
	}
}

// Lookup returns the entry of k if it is held and younger than Window at
// now.
func (t *Table) Lookup(k Key, now time.Time) (Entry, bool) {
	defer runtime.KeepAlive(t)
	i, ok := t.find(&k)
	if !ok {
		return Entry{}, false
	}
	s := &t.ring[t.index[i]-1]
	if now.UnixNano()-s.at >= int64(Window) {
		return Entry{}, false
	}
	return s.entry(), true
}

// put stores e as entry a, whose slot is free, and indexes it.
func (t *Table) put(a uint64, k Key, e Entry) {
	p := a % uint64(t.max)
	t.ring[p] = slotOf(k, e)
	mask := len(t.index) - 1
	i := k.home(mask)
	for t.index[i] != 0 {
		i = (i + 1) & mask
	}
	t.index[i] = uint32(p) + 1
	t.held++
}

// kill forgets the live entry at index position i; its slot stays in the
// ring, dead, until it leaves the ring.
func (t *Table) kill(i int) {
	t.ring[t.index[i]-1].turn = 0
	t.held--
	// Close the gap: move up every later entry of the run that may not
	// be searched for past it (backward-shift deletion).
	mask := len(t.index) - 1
	for j := (i + 1) & mask; t.index[j] != 0; j = (j + 1) & mask {
		h := t.ring[t.index[j]-1].key.home(mask)
		if (j-h)&mask >= (j-i)&mask { // h is not in (i, j]
			t.index[i], i = t.index[j], j
		}
	}
	t.index[i] = 0
}

// pop takes the oldest entry out of the ring, forgetting it if it was
// live (then it returns its at).
func (t *Table) pop() (at int64, live bool) {
	s := t.slot(t.first)
	t.first++
	if s.turn == 0 {
		return 0, false
	}
	at = s.at
	if i, ok := t.find(&s.key); ok {
		t.kill(i)
	}
	return at, true
}

// Add remembers a key, forgetting the oldest beyond the cap. Keys are
// added in time order.
func (t *Table) Add(k Key, e Entry) {
	defer runtime.KeepAlive(t)
	if i, ok := t.find(&k); ok {
		t.kill(i)
	}
	if t.next-t.first == uint64(t.max) {
		if at, live := t.pop(); live {
			t.evictedUntil.Store(max(t.evictedUntil.Load(), at))
		}
	}
	t.put(t.next, k, e)
	t.next++
}

// LoadOlder remembers a key at start-up, where they come newest first and
// at most the cap of them (see Loaded): below the oldest held.
func (t *Table) LoadOlder(k Key, e Entry) {
	defer runtime.KeepAlive(t)
	t.loadedRows++
	if _, ok := t.find(&k); ok || t.next-t.first == uint64(t.max) {
		return // a newer use of the key (or of its hash), or a row too many
	}
	t.first--
	t.put(t.first, k, e)
}

// Loaded ends the start-up load: when it read as many keys as the cap,
// older ones of the window may be left in Postgres, so memory may miss
// keys as old as the oldest it holds.
func (t *Table) Loaded() {
	defer runtime.KeepAlive(t)
	if t.loadedRows >= t.max && t.next > t.first {
		t.evictedUntil.Store(t.slot(t.first).at)
	}
}

// MayMiss reports whether a key used at or after since may have been
// forgotten for the cap.
func (t *Table) MayMiss(since time.Time) bool {
	return t.evictedUntil.Load() >= since.UnixNano()
}

// ForgetFrom drops the keys of group seq and later (they did not commit).
func (t *Table) ForgetFrom(seq uint64) {
	defer runtime.KeepAlive(t)
	for a := t.first; a < t.next; a++ {
		if s := t.slot(a); s.turn != 0 && s.seq >= seq {
			if i, ok := t.find(&s.key); ok {
				t.kill(i)
			}
		}
	}
	for t.next > t.first && t.slot(t.next-1).turn == 0 {
		t.next--
	}
}

// Expire forgets keys older than the window: the oldest come first.
func (t *Table) Expire(now time.Time) {
	defer runtime.KeepAlive(t)
	for t.first < t.next {
		if s := t.slot(t.first); s.turn != 0 && now.UnixNano()-s.at < int64(Window) {
			return
		}
		t.pop()
	}
}

// Len returns how many keys the table holds.
func (t *Table) Len() int { return t.held }

// LoadedRows returns how many keys the start-up load read (LoadOlder).
func (t *Table) LoadedRows() int { return t.loadedRows }

// Holds reports whether the table holds k, however old.
func (t *Table) Holds(k Key) bool {
	defer runtime.KeepAlive(t)
	_, ok := t.find(&k)
	return ok
}

// Cap returns the most keys the table holds.
func (t *Table) Cap() int { return t.max }
