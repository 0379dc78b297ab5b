package store

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// keyedRequest is what an idempotency key stands for: an exact repeat of
// these is a retry and gets the original turn; anything else under the
// same key is a mistake the client must hear about.
type keyedRequest struct {
	hash        ident.Hash // of the uncompressed payload
	typeID      string
	typeVersion uint32
	parent      uint64 // as sent: 0 means after the head
	parentKnown bool   // false for keys stored before the parent was
}

func requestOf(req *AppendRequest) keyedRequest {
	return keyedRequest{
		hash: req.ContentHash, typeID: req.TypeID, typeVersion: req.TypeVersion,
		parent: req.ParentTurnID, parentKnown: true,
	}
}

// checkRepeat returns a fault.Conflict error when req reuses the key of the
// append orig (which made turn) for something else; nil for an exact
// repeat. The error's details name the original turn and what differs.
func checkRepeat(req *AppendRequest, orig keyedRequest, turn uint64) error {
	var differs []string
	if req.ContentHash != orig.hash {
		differs = append(differs, "payload")
	}
	if req.TypeID != orig.typeID {
		differs = append(differs, "type_id")
	}
	if req.TypeVersion != orig.typeVersion {
		differs = append(differs, "type_version")
	}
	if orig.parentKnown && req.ParentTurnID != orig.parent {
		differs = append(differs, "parent_turn_id")
	}
	if len(differs) == 0 {
		return nil
	}
	err := fault.New(fault.Conflict, "idempotency key %q was used for turn %d with a different %s; an exact repeat returns that turn, a different append needs a new key",
		req.IdempotencyKey, turn, strings.Join(differs, ", "))
	err.Details = map[string]any{
		"original_turn_id": strconv.FormatUint(turn, 10),
		"context_id":       strconv.FormatUint(req.ContextID, 10),
		"differs":          differs,
	}
	return err
}

// IdempotencyWindow is how long a repeated idempotency key returns the
// original turn.
const IdempotencyWindow = 24 * time.Hour

// DefaultMaxIdempotencyKeys is the default Options.MaxIdempotencyKeys.
const DefaultMaxIdempotencyKeys = 250_000

// idemKey names an idempotency key within a tenant's context: a hash of
// the three, so that an entry's size does not depend on what clients send.
type idemKey [16]byte

func newIdemKey(tenant uint32, contextID uint64, key []byte) idemKey {
	var buf [128]byte
	b := binary.LittleEndian.AppendUint32(buf[:0], tenant)
	b = binary.LittleEndian.AppendUint64(b, contextID)
	h := blake3.Sum256(append(b, key...))
	return idemKey(h[:16])
}

// home is where a key's search starts in an index of mask+1 positions.
func (k *idemKey) home(mask int) int {
	return int(binary.LittleEndian.Uint64(k[:8])) & mask
}

// idemEntry is the turn a key produced, when, in which group (0 for keys
// loaded at start), and the parent its append asked for (as sent, 0 for
// the head; unknown for keys stored before that was recorded).
type idemEntry struct {
	turn        uint64
	at          time.Time
	seq         uint64
	parent      uint64
	parentKnown bool
}

// idemSlot is an idemEntry as the table holds it (48 bytes, no pointers).
type idemSlot struct {
	key  idemKey
	turn uint64 // 0: a dead slot (its key was added again, or forgotten)
	at   int64  // unix nanoseconds
	seq  uint64
	// parent is the parent as sent plus one; 0: unknown.
	parent uint64
}

func (s *idemSlot) entry() idemEntry {
	return idemEntry{
		turn: s.turn, at: time.Unix(0, s.at), seq: s.seq,
		parent: max(s.parent, 1) - 1, parentKnown: s.parent != 0,
	}
}

func slotOf(k idemKey, e idemEntry) idemSlot {
	s := idemSlot{key: k, turn: e.turn, at: e.at.UnixNano(), seq: e.seq}
	if e.parentKnown {
		s.parent = e.parent + 1
	}
	return s
}

// idemTable remembers the keys of the last IdempotencyWindow, including
// those of groups still in flight, up to a cap: beyond it the oldest are
// forgotten, and Postgres, which keeps every key for the window, answers
// for them (see Engine.replayFromDB). Only the committer's writer stage
// reads and writes it, except evictedUntil.
//
// Keys come in time order and leave oldest first (for the cap, or
// expired), so the entries are a ring of slots, oldest first, with an
// open-addressing index of ring positions by key: at most 64 bytes a key
// (a 48-byte slot, and two to four index positions of 4 bytes), no
// pointers, mapped outside the Go heap where the platform allows (see
// mapIdemTable), and touched only as keys come. A Go map of the keys and
// a list of them in time order took over 250 bytes a key, and, on the
// heap, let as much again of garbage gather before a collection.
type idemTable struct {
	// ring holds the entries numbered first up to next (not included),
	// at most max of them: entry a is ring[a%max]. Numbers only grow, but
	// for the start-up load, which adds older entries below first.
	ring        []idemSlot
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

// idemTableStart numbers the first entry, leaving room below it for the
// start-up load.
const idemTableStart = 1 << 62

func newIdemTable(max int) *idemTable {
	if max <= 0 {
		max = DefaultMaxIdempotencyKeys
	}
	max = min(max, math.MaxInt32/4)
	positions := 1
	for positions < 2*max {
		positions *= 2
	}
	t := &idemTable{max: max, first: idemTableStart, next: idemTableStart}
	if ring, index, mapping, ok := mapIdemTable(max, positions); ok {
		t.ring, t.index = ring, index
		runtime.AddCleanup(t, unmapIdemTable, mapping)
	} else {
		t.ring, t.index = make([]idemSlot, max), make([]uint32, positions)
	}
	return t
}

// The methods below keep t alive (runtime.KeepAlive) while they use its
// slots: its cleanup unmaps them.

func (t *idemTable) slot(a uint64) *idemSlot { return &t.ring[a%uint64(t.max)] }

// find returns the index position of k's live entry, or false.
func (t *idemTable) find(k *idemKey) (int, bool) {
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

func (t *idemTable) lookup(k idemKey, now time.Time) (idemEntry, bool) {
	defer runtime.KeepAlive(t)
	i, ok := t.find(&k)
	if !ok {
		return idemEntry{}, false
	}
	s := &t.ring[t.index[i]-1]
	if now.UnixNano()-s.at >= int64(IdempotencyWindow) {
		return idemEntry{}, false
	}
	return s.entry(), true
}

// put stores e as entry a, whose slot is free, and indexes it.
func (t *idemTable) put(a uint64, k idemKey, e idemEntry) {
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
func (t *idemTable) kill(i int) {
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
func (t *idemTable) pop() (at int64, live bool) {
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

// add remembers a key, forgetting the oldest beyond the cap. Keys are
// added in time order.
func (t *idemTable) add(k idemKey, e idemEntry) {
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

// loadOlder remembers a key at start-up, where they come newest first and
// at most the cap of them (see loaded): below the oldest held.
func (t *idemTable) loadOlder(k idemKey, e idemEntry) {
	defer runtime.KeepAlive(t)
	t.loadedRows++
	if _, ok := t.find(&k); ok || t.next-t.first == uint64(t.max) {
		return // a newer use of the key (or of its hash), or a row too many
	}
	t.first--
	t.put(t.first, k, e)
}

// loaded ends the start-up load: when it read as many keys as the cap,
// older ones of the window may be left in Postgres, so memory may miss
// keys as old as the oldest it holds.
func (t *idemTable) loaded() {
	defer runtime.KeepAlive(t)
	if t.loadedRows >= t.max && t.next > t.first {
		t.evictedUntil.Store(t.slot(t.first).at)
	}
}

// mayMiss reports whether a key used at or after since may have been
// forgotten for the cap.
func (t *idemTable) mayMiss(since time.Time) bool {
	return t.evictedUntil.Load() >= since.UnixNano()
}

// forgetFrom drops the keys of group seq and later (they did not commit).
func (t *idemTable) forgetFrom(seq uint64) {
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

// expire forgets keys older than the window: the oldest come first.
func (t *idemTable) expire(now time.Time) {
	defer runtime.KeepAlive(t)
	for t.first < t.next {
		if s := t.slot(t.first); s.turn != 0 && now.UnixNano()-s.at < int64(IdempotencyWindow) {
			return
		}
		t.pop()
	}
}

// replayFromDB answers a keyed append from Postgres, for when the key may
// be one the in-memory index forgot for its cap: found reports whether the
// key was used in the window (then the answer is the original turn or a
// conflict). Recent keys are always in memory, so a key committed while
// this runs is caught by the planner.
func (e *Engine) replayFromDB(ctx context.Context, t ident.Tenant, req *AppendRequest) (res AppendResult, found bool, err error) {
	row, err := e.as(pgrole.Tenant, t.ID).GetIdempotencyKey(ctx, db.GetIdempotencyKeyParams{
		TenantID: t.ID, ContextID: int64(req.ContextID), IdempotencyKey: req.IdempotencyKey,
		Since: e.now().Add(-IdempotencyWindow),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return AppendResult{}, false, nil
	}
	if err != nil {
		return AppendResult{}, true, fault.Wrap(fault.Unavailable, err, "look up idempotency key")
	}
	turn := uint64(row.TurnID)
	m, ok := e.table.get(turn)
	if !ok {
		return AppendResult{}, true, fault.New(fault.Internal, "idempotency key names turn %d, which is not loaded", turn)
	}
	orig := keyedRequest{
		hash: m.hash, typeID: e.types.name(m.tenant, m.typeRef), typeVersion: m.typeVersion,
		parent: uint64(row.RequestedParentTurnID.Int64), parentKnown: row.RequestedParentTurnID.Valid,
	}
	if err := checkRepeat(req, orig, turn); err != nil {
		return AppendResult{}, true, err
	}
	return AppendResult{ContextID: req.ContextID, TurnID: turn, ParentID: m.parent, Depth: m.depth, ContentHash: m.hash, Replayed: true}, true, nil
}

// purgeInterval is how often expired idempotency keys are deleted from
// Postgres.
const purgeInterval = 10 * time.Minute

// PurgeIdempotencyKeys deletes the keys older than IdempotencyWindow from
// Postgres and returns how many; memory forgets them as it goes.
func (e *Engine) PurgeIdempotencyKeys(ctx context.Context) (int64, error) {
	n, err := e.as(pgrole.Sweeper, "").DeleteIdempotencyKeysBefore(ctx, e.now().Add(-IdempotencyWindow))
	if err != nil {
		return 0, fault.Wrap(fault.Unavailable, err, "purge idempotency keys")
	}
	return n, nil
}

// startPurge runs PurgeIdempotencyKeys every purgeInterval until Close.
func (e *Engine) startPurge() {
	ctx, cancel := context.WithCancel(context.Background())
	e.stopPurge, e.purgeDone = cancel, make(chan struct{})
	go func() {
		defer close(e.purgeDone)
		t := time.NewTicker(purgeInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if n, err := e.PurgeIdempotencyKeys(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("purge idempotency keys", "err", err)
			} else if n > 0 {
				e.log.Info("purged expired idempotency keys", "keys", n)
			}
		}
	}()
}
