// Package usage keeps the bytes each tenant stores in the turn store,
// which its storage quota limits. A tenant is charged as if it were alone,
// whatever deduplication saves:
//
//   - each distinct blob it owns (turn payloads, fs trees and files), its
//     uncompressed length, once: whether it stored the bytes first (the
//     blob pack records the first owner and counts its bytes,
//     blobpack.Pack.OwnerBytes) or after another tenant did (a grant in
//     tenant_blobs, counted by the Ledger), less the blobs whose first
//     writer released its claim (released_blob_claims, also counted by
//     the Ledger: the pack's records are never rewritten);
//   - each turn and each context, a fixed TurnCharge or ContextCharge;
//   - each registry bundle, the length of its body.
//
// Nothing of it is kept in Postgres as a counter: a blob's first owner is
// recorded only in the blob pack, written before the group's transaction,
// so no counter could change atomically with it. The counts are derived at
// every start from what is durable (the pack's records, the committed turn
// log, the committed rows of grants, contexts and bundles) and kept in
// memory as writes become durable, so a crash cannot make them drift. A
// blob written for a group that then failed to commit stays in the pack
// and owned by its writer (who reads it, and is not charged again when it
// retries), so it is charged both before and after a restart.
package usage

import (
	"iter"
	"sync"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// TurnCharge is what a turn costs beside its payload: the size of its
// record in turns.log, which also stands for its Postgres rows.
const TurnCharge = turnlog.RecordSize

// ContextCharge is what a context (or fork) costs: like a turn.
const ContextCharge = 128

// Grant records that a tenant stores bytes another tenant stored first
// (a row of tenant_blobs).
type Grant struct {
	Tenant uint32
	Hash   ident.Hash
}

// Ledger holds the charges the blob pack does not count itself: granted
// blobs, turns, contexts and bundles, by tenant. Safe for concurrent use.
type Ledger struct {
	mu     sync.RWMutex
	bytes  map[uint32]int64   // by tenant
	grants map[Grant]struct{} // committed rows of tenant_blobs
	// released are the first writers' claims released (rows of
	// released_blob_claims): the pack still counts them, the ledger
	// takes them off.
	released map[Grant]struct{}
}

// New returns an empty ledger.
func New() *Ledger {
	return &Ledger{bytes: map[uint32]int64{}, grants: map[Grant]struct{}{}, released: map[Grant]struct{}{}}
}

// Add charges tenant n bytes.
func (l *Ledger) Add(tenant uint32, n int64) {
	l.mu.Lock()
	l.bytes[tenant] += n
	l.mu.Unlock()
}

// Of returns what tenant is charged.
func (l *Ledger) Of(tenant uint32) int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.bytes[tenant]
}

// Granted reports whether g is a committed grant.
func (l *Ledger) Granted(g Grant) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.grants[g]
	return ok
}

// Grant records a committed grant, charging size unless it was known.
func (l *Ledger) Grant(g Grant, size int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grantLocked(g, size)
}

// Ungrant records that a grant's row went, uncharging size if it was
// known.
func (l *Ledger) Ungrant(g Grant, size int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.grants[g]; ok {
		delete(l.grants, g)
		l.bytes[g.Tenant] -= size
	}
}

// Released reports whether g.Tenant, the first writer of g.Hash, released
// its claim: it no longer owns the blob unless it holds a grant too.
func (l *Ledger) Released(g Grant) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.released[g]
	return ok
}

// Release records that g.Tenant, the first writer of g.Hash, released
// its claim, uncharging size unless it was known. A first writer that
// stores the bytes again gets a grant (Grant), charged as any other's.
func (l *Ledger) Release(g Grant, size int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.released[g]; !ok {
		l.released[g] = struct{}{}
		l.bytes[g.Tenant] -= size
	}
}

// Unrelease forgets a released claim whose blob left the pack (a
// compaction dropped its record, and with it the size the pack counted):
// size, taken off by Release, is charged back so that the two cancel.
func (l *Ledger) Unrelease(g Grant, size int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.released[g]; ok {
		delete(l.released, g)
		l.bytes[g.Tenant] += size
	}
}

func (l *Ledger) grantLocked(g Grant, size int64) {
	if _, ok := l.grants[g]; !ok {
		l.grants[g] = struct{}{}
		l.bytes[g.Tenant] += size
	}
}

// ChargeGroup charges a committed group at once: TurnCharge to the
// tenant of each of its turns, and its grants with their blobs' sizes.
func (l *Ledger) ChargeGroup(turnTenants iter.Seq[uint32], grantSizes map[Grant]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for tenant := range turnTenants {
		l.bytes[tenant] += TurnCharge
	}
	for g, size := range grantSizes {
		l.grantLocked(g, size)
	}
}
