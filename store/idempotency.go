package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// keyedRequest is what an idempotency key stands for: an exact repeat of
// these is a retry and gets the original turn; anything else under the
// same key is a mistake the client must hear about.
type keyedRequest struct {
	hash        Hash // of the uncompressed payload
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

// checkRepeat returns a KindConflict error when req reuses the key of the
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
	err := errorf(KindConflict, "idempotency key %q was used for turn %d with a different %s; an exact repeat returns that turn, a different append needs a new key",
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

// idemKey names an idempotency key within a tenant's context. The key is
// held as a hash, so that an entry's size does not depend on what clients
// send.
type idemKey struct {
	tenant  uint32
	context uint64
	key     [16]byte
}

func newIdemKey(tenant uint32, contextID uint64, key []byte) idemKey {
	h := blake3.Sum256(key)
	k := idemKey{tenant: tenant, context: contextID}
	copy(k.key[:], h[:])
	return k
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

// idemTable remembers the keys of the last IdempotencyWindow, including
// those of groups still in flight, up to a cap: beyond it the oldest are
// forgotten, and Postgres, which keeps every key for the window, answers
// for them (see Engine.replayFromDB). Only the committer's writer stage
// reads and writes it, except evictedUntil.
type idemTable struct {
	m     map[idemKey]idemEntry
	order []keyAt // insertion order, oldest first, from order[head]
	head  int
	max   int
	// evictedUntil is the newest at (unix nanoseconds) of an entry
	// forgotten for the cap: keys of that age or younger may be missing.
	evictedUntil atomic.Int64
}

// keyAt is a key as it was inserted: a later insert of the same key
// leaves the older keyAt stale.
type keyAt struct {
	k  idemKey
	at time.Time
}

func newIdemTable(max int) *idemTable {
	if max <= 0 {
		max = DefaultMaxIdempotencyKeys
	}
	return &idemTable{m: map[idemKey]idemEntry{}, max: max}
}

func (t *idemTable) lookup(k idemKey, now time.Time) (idemEntry, bool) {
	e, ok := t.m[k]
	if !ok || now.Sub(e.at) >= IdempotencyWindow {
		return idemEntry{}, false
	}
	return e, true
}

// add remembers a key, forgetting the oldest beyond the cap. Keys are
// added in time order.
func (t *idemTable) add(k idemKey, e idemEntry) {
	t.m[k] = e
	t.order = append(t.order, keyAt{k, e.at})
	for len(t.m) > t.max {
		if old, ok := t.popOldest(); ok {
			t.evictedUntil.Store(max(t.evictedUntil.Load(), old.at.UnixNano()))
		}
	}
}

// mayMiss reports whether a key used at or after since may have been
// forgotten for the cap.
func (t *idemTable) mayMiss(since time.Time) bool {
	return t.evictedUntil.Load() >= since.UnixNano()
}

// popOldest forgets the oldest key still held and returns its entry.
func (t *idemTable) popOldest() (idemEntry, bool) {
	for t.head < len(t.order) {
		ka := t.order[t.head]
		t.order[t.head] = keyAt{}
		t.head++
		if e, ok := t.m[ka.k]; ok && e.at.Equal(ka.at) {
			delete(t.m, ka.k)
			t.compact()
			return e, true
		}
	}
	t.compact()
	return idemEntry{}, false
}

// compact drops the popped front of order once it is half of it.
func (t *idemTable) compact() {
	if t.head > 1024 && t.head > len(t.order)/2 {
		t.order = append(t.order[:0], t.order[t.head:]...)
		t.head = 0
	}
}

// forgetFrom drops the keys of group seq and later (they did not commit).
func (t *idemTable) forgetFrom(seq uint64) {
	for k, e := range t.m {
		if e.seq >= seq {
			delete(t.m, k)
		}
	}
}

// expire forgets keys older than the window: the oldest come first.
func (t *idemTable) expire(now time.Time) {
	for t.head < len(t.order) && now.Sub(t.order[t.head].at) >= IdempotencyWindow {
		t.popOldest()
	}
}

// replayFromDB answers a keyed append from Postgres, for when the key may
// be one the in-memory index forgot for its cap: found reports whether the
// key was used in the window (then the answer is the original turn or a
// conflict). Recent keys are always in memory, so a key committed while
// this runs is caught by the planner.
func (e *Engine) replayFromDB(ctx context.Context, t Tenant, req *AppendRequest) (res AppendResult, found bool, err error) {
	row, err := e.as(pgrole.Tenant, t.ID).GetIdempotencyKey(ctx, db.GetIdempotencyKeyParams{
		TenantID: t.ID, ContextID: int64(req.ContextID), IdempotencyKey: req.IdempotencyKey,
		Since: e.now().Add(-IdempotencyWindow),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return AppendResult{}, false, nil
	}
	if err != nil {
		return AppendResult{}, true, wrapf(KindUnavailable, err, "look up idempotency key")
	}
	turn := uint64(row.TurnID)
	m, ok := e.table.get(turn)
	if !ok {
		return AppendResult{}, true, errorf(KindInternal, "idempotency key names turn %d, which is not loaded", turn)
	}
	orig := keyedRequest{
		hash: m.hash, typeID: e.types.name(m.tenant, m.typeRef), typeVersion: m.typeVersion,
		parent: uint64(row.RequestedParentTurnID.Int64), parentKnown: row.RequestedParentTurnID.Valid,
	}
	if err := checkRepeat(req, orig, turn); err != nil {
		return AppendResult{}, true, err
	}
	return AppendResult{ContextID: req.ContextID, TurnID: turn, Depth: m.depth, ContentHash: m.hash, Replayed: true}, true, nil
}

// purgeInterval is how often expired idempotency keys are deleted from
// Postgres.
const purgeInterval = 10 * time.Minute

// PurgeIdempotencyKeys deletes the keys older than IdempotencyWindow from
// Postgres and returns how many; memory forgets them as it goes.
func (e *Engine) PurgeIdempotencyKeys(ctx context.Context) (int64, error) {
	n, err := e.as(pgrole.Sweeper, "").DeleteIdempotencyKeysBefore(ctx, e.now().Add(-IdempotencyWindow))
	if err != nil {
		return 0, wrapf(KindUnavailable, err, "purge idempotency keys")
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
