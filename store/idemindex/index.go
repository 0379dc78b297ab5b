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
// stage reads and writes it, except MayMiss and Mark.
//
// Keys come in time order and leave oldest first (for the cap, or
// expired), so the entries are a ring of slots, oldest first, with an
// open-addressing index of ring positions by key: at most 64 bytes a key
// (a 48-byte slot, and two to four index positions of 4 bytes), no
// pointers, mapped outside the Go heap where the platform allows (see
// mapTable), and touched only as keys come. A Go map of the keys and
// a list of them in time order took over 250 bytes a key, and, on the
// heap, let as much again of garbage gather before a collection.
//
// Past the cap the oldest key is forgotten, but its entry stays in the
// ring (and found by Lookup) for slack more keys: an append checks
// whether memory may miss its key (MayMiss) before it is queued, and the
// planner looks the key up later; a key still held at the check must
// still be found then. Mark and Stale tell the planner when more than the
// slack went by in between, which only a long wait allows.
type Table struct {
	// ring holds the entries numbered first up to next (not included),
	// at most size of them: entry a is ring[a%size]. Numbers only grow,
	// but for the start-up load, which adds older entries below first.
	// The entries before held0 are forgotten for the cap: their keys are
	// in evicted, and they stay for Lookup until the slack is used.
	ring        []ringSlot
	first, next uint64
	held0       uint64        // the first entry held for the cap (first <= held0 <= next)
	mark        atomic.Uint64 // held0, for other goroutines (Mark)
	size        int           // max plus the slack
	slackLive   int           // live entries before held0
	// index holds ring positions plus one (0: free), with linear probing
	// from each key's home; its length is a power of two at least twice
	// the cap and one and a half times the ring's.
	index []uint32
	held  int // live slots, held0 or later or not
	max   int
	// evicted remembers the keys forgotten for the cap, approximately,
	// while they are in the window.
	evicted evicted
	// evictedUntil is the newest at (unix nanoseconds) of a key that
	// memory may miss without evicted knowing: one left in Postgres at
	// start-up (then the oldest at loaded, which no key left there is
	// newer than), or one of a segment of evicted dropped early for its
	// bound. Keys of that age or younger may be missing, whatever the key.
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
	max = min(max, math.MaxInt32/8)
	return newTable(max, Slack(max))
}

// newTable returns an empty table of at most max keys, whose entries stay
// for slack more after their keys are forgotten.
func newTable(max, slack int) *Table {
	size := max + slack
	positions := 1 // the load factor stays under 2/3 with every slot live
	for positions < 2*max || positions < size+size/2 {
		positions *= 2
	}
	t := &Table{max: max, size: size, first: firstEntry, next: firstEntry, held0: firstEntry}
	t.mark.Store(firstEntry)
	t.evicted.init(max)
	if ring, index, mapping, ok := mapTable(size, positions); ok {
		t.ring, t.index = ring, index
		runtime.AddCleanup(t, unmapTable, mapping)
	} else {
		t.ring, t.index = make([]ringSlot, size), make([]uint32, positions)
	}
	return t
}

// Slack returns how many keys past a cap of keys an entry stays in the
// ring after its key is forgotten: a sixteenth of the cap, at least 1,024.
func Slack(keys int) int { return max(keys/16, 1024) }

// Mark returns where the keys held for the cap begin, to take before
// MayMiss; Stale, given it later, reports whether an entry held then may
// have left the ring since. Safe for any goroutine.
func (t *Table) Mark() uint64 { return t.mark.Load() }

// Stale reports whether more keys than the slack came since Mark returned
// mark: a key held then may have left the ring, so that Lookup no longer
// finds it, without MayMiss having said so at the mark.
func (t *Table) Stale(mark uint64) bool { return t.first > mark }

// setHeld0 moves where the keys held for the cap begin.
func (t *Table) setHeld0(a uint64) {
	t.held0 = a
	t.mark.Store(a)
}

// The methods below keep t alive (runtime.KeepAlive) while they use its
// slots: its cleanup unmaps them.

func (t *Table) slot(a uint64) *ringSlot { return &t.ring[a%uint64(t.size)] }

// number returns the number of the entry at ring position p.
func (t *Table) number(p uint64) uint64 {
	size := uint64(t.size)
	return t.first + (p+size-t.first%size)%size
}

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
	p := a % uint64(t.size)
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
	p := uint64(t.index[i] - 1)
	t.ring[p].turn = 0
	t.held--
	if t.number(p) < t.held0 {
		t.slackLive--
	}
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
// live.
func (t *Table) pop() {
	if s := t.slot(t.first); s.turn != 0 {
		if i, ok := t.find(&s.key); ok {
			t.kill(i)
		}
	}
	t.first++
	if t.held0 < t.first {
		t.setHeld0(t.first)
	}
}

// Add remembers a key, forgetting the oldest beyond the cap. Keys are
// added in time order.
func (t *Table) Add(k Key, e Entry) {
	defer runtime.KeepAlive(t)
	if i, ok := t.find(&k); ok {
		t.kill(i)
	}
	if t.next-t.held0 == uint64(t.max) {
		// The oldest held is forgotten for the cap: the filter learns
		// it, and its entry stays for the slack.
		if s := t.slot(t.held0); s.turn != 0 {
			if until, dropped := t.evicted.add(&s.key, s.at); dropped {
				t.evictedUntil.Store(max(t.evictedUntil.Load(), until))
			}
			t.slackLive++
		}
		t.setHeld0(t.held0 + 1)
	}
	if t.next-t.first == uint64(t.size) {
		t.pop()
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
	t.setHeld0(t.first)
	t.put(t.first, k, e)
}

// OldestHeld returns when the oldest key memory holds was used, if it
// holds any.
func (t *Table) OldestHeld() (time.Time, bool) {
	defer runtime.KeepAlive(t)
	if t.next == t.first {
		return time.Time{}, false
	}
	return time.Unix(0, t.slot(t.first).at), true
}

// LoadForgotten remembers at start-up a key of the window older than those
// LoadOlder loaded, used at at: the filter of forgotten keys learns it, as
// if memory had held and forgotten it for the cap, so that a new key is not
// mistaken for it. Keys come oldest first, before Loaded.
func (t *Table) LoadForgotten(k Key, at time.Time) {
	if until, dropped := t.evicted.add(&k, at.UnixNano()); dropped {
		t.evictedUntil.Store(max(t.evictedUntil.Load(), until))
	}
}

// Loaded ends the start-up load. When it read as many keys as the cap,
// older ones of the window may be left in Postgres: unless they were all
// given to LoadForgotten (olderForgotten), memory may miss any key as old
// as the oldest it holds, and every key not held must be asked about.
func (t *Table) Loaded(olderForgotten bool) {
	defer runtime.KeepAlive(t)
	if !olderForgotten && t.loadedRows >= t.max && t.next > t.first {
		t.evictedUntil.Store(t.slot(t.first).at)
	}
}

// MayMiss reports whether k, if used after since, may have been
// forgotten for the cap: then only Postgres knows. Safe for any goroutine.
func (t *Table) MayMiss(k Key, since time.Time) bool {
	s := since.UnixNano()
	return t.evictedUntil.Load() >= s || t.evicted.mayHold(&k, s)
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
	if t.held0 > t.next {
		t.setHeld0(t.next)
	}
}

// Expire forgets keys older than the window: the oldest come first.
func (t *Table) Expire(now time.Time) {
	defer runtime.KeepAlive(t)
	for t.first < t.next {
		if s := t.slot(t.first); s.turn != 0 && now.UnixNano()-s.at < int64(Window) {
			break
		}
		t.pop()
	}
	t.evicted.expire(now.UnixNano() - int64(Window))
}

// Len returns how many keys the table holds for the cap (not counting
// those forgotten that the slack still keeps).
func (t *Table) Len() int { return t.held - t.slackLive }

// LoadedRows returns how many keys the start-up load read (LoadOlder).
func (t *Table) LoadedRows() int { return t.loadedRows }

// Holds reports whether the table holds k for the cap, however old.
func (t *Table) Holds(k Key) bool {
	defer runtime.KeepAlive(t)
	i, ok := t.find(&k)
	return ok && t.number(uint64(t.index[i]-1)) >= t.held0
}

// Cap returns the most keys the table holds.
func (t *Table) Cap() int { return t.max }
