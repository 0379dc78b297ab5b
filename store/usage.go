package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// Storage accounting: the bytes each tenant stores in the turn store, which
// its storage quota (Options.Quota) limits. A tenant is charged as if it
// were alone, whatever deduplication saves:
//
//   - each distinct blob it owns (turn payloads, fs trees and files), its
//     uncompressed length, once: whether it stored the bytes first (the
//     blob pack records the first owner and counts its bytes,
//     blobpack.Pack.OwnerBytes) or after another tenant did (a grant in
//     tenant_blobs, counted here);
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

// TurnCharge is what a turn costs beside its payload: the size of its
// record in turns.log, which also stands for its Postgres rows.
const TurnCharge = turnlog.RecordSize

// ContextCharge is what a context (or fork) costs: like a turn.
const ContextCharge = 128

// QuotaFunc decides whether tenant t may store adding more bytes; stored
// is what the turn store holds for it (Engine.Usage). It returns nil to let
// the write through, else the error that refuses it, of kind
// KindQuotaExceeded (internal/quota's Exceeded).
// Writes that add nothing (adding 0) are asked too: a tenant already over
// its quota writes nothing.
type QuotaFunc func(ctx context.Context, t ident.Tenant, stored, adding int64) error

// QuotaExceeded is the error of a write refused because it would take
// the tenant over its storage quota: used bytes stored of quota, adding
// more. It is distinct from a full disk (fault.DiskFull).
func QuotaExceeded(tenant string, used, quota, adding int64) *fault.Error {
	err := fault.New(fault.QuotaExceeded, "storage quota exceeded: tenant %q stores %d bytes of its %d-byte quota and this write would add %d; "+
		"nothing was written (this is the tenant's quota, not a full disk: the operator can raise it with `cardbox tenant quota`)",
		tenant, used, quota, adding)
	err.Details = map[string]any{"used_bytes": used, "quota_bytes": quota, "adding_bytes": adding}
	return err
}

// usage holds the charges the blob pack does not count itself.
type usage struct {
	mu     sync.RWMutex
	bytes  map[uint32]int64   // by tenant: granted blobs, turns, contexts, bundles
	grants map[grant]struct{} // committed rows of tenant_blobs
}

func newUsage() *usage {
	return &usage{bytes: map[uint32]int64{}, grants: map[grant]struct{}{}}
}

func (u *usage) add(tenant uint32, n int64) {
	u.mu.Lock()
	u.bytes[tenant] += n
	u.mu.Unlock()
}

func (u *usage) of(tenant uint32) int64 {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.bytes[tenant]
}

// granted reports whether g is a committed grant.
func (u *usage) granted(g grant) bool {
	u.mu.RLock()
	defer u.mu.RUnlock()
	_, ok := u.grants[g]
	return ok
}

// grant records a committed grant, charging size unless it was known.
func (u *usage) grant(g grant, size int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.grantLocked(g, size)
}

func (u *usage) grantLocked(g grant, size int64) {
	if _, ok := u.grants[g]; !ok {
		u.grants[g] = struct{}{}
		u.bytes[g.tenant] += size
	}
}

// Usage returns the bytes tenant t stores in the turn store (see the
// accounting above): exact for what is durable, not counting writes in
// flight.
func (e *Engine) Usage(t ident.Tenant) int64 {
	return e.blobs.OwnerBytes(t.No) + e.usage.of(t.No)
}

// CheckQuota asks Options.Quota whether t may store adding more bytes,
// for a write beside the store (a registry bundle) that is charged with
// Charge once it is durable.
func (e *Engine) CheckQuota(ctx context.Context, t ident.Tenant, adding int64) error {
	return e.checkQuota(ctx, t, adding)
}

// Charge adds the bytes of a registry bundle just stored to what t
// stores; start-up counts them from the bundles' rows (see loadUsage).
func (e *Engine) Charge(t ident.Tenant, bytes int64) { e.usage.add(t.No, bytes) }

// checkQuota asks Options.Quota whether t may store adding more bytes.
func (e *Engine) checkQuota(ctx context.Context, t ident.Tenant, adding int64) error {
	if e.opts.Quota == nil {
		return nil
	}
	return e.opts.Quota(ctx, t, e.Usage(t), adding)
}

// admitBlob asks Options.Quota whether t may store blob h of size bytes
// and extra bytes more; the blob adds nothing when t owns it already.
// Without quotas it looks nothing up.
func (e *Engine) admitBlob(ctx context.Context, t ident.Tenant, h ident.Hash, size int, extra int64) error {
	if e.opts.Quota == nil {
		return nil
	}
	adding := extra
	if entry, ok := e.blobs.Lookup(h); !ok || (entry.Owner != t.No && !e.usage.granted(grant{t.No, h})) {
		adding += int64(size)
	}
	return e.checkQuota(ctx, t, adding)
}

// chargeGroup charges a committed group's turns and grants (its new blobs
// were counted by the pack when they were written).
func (e *Engine) chargeGroup(p *plan) {
	if len(p.turns) == 0 && len(p.grants) == 0 {
		return
	}
	var sizes map[grant]int64 // looked up before taking the lock
	if len(p.grants) > 0 {
		sizes = make(map[grant]int64, len(p.grants))
		for g := range p.grants {
			if entry, ok := e.blobs.Lookup(g.hash); ok {
				sizes[g] = int64(entry.RawLen)
			}
		}
	}
	e.usage.mu.Lock()
	defer e.usage.mu.Unlock()
	for i := range p.turns {
		e.usage.bytes[p.turns[i].meta.tenant] += TurnCharge
	}
	for g, size := range sizes {
		e.usage.grantLocked(g, size)
	}
}

// loadUsage charges, at start-up, the committed grants and registry
// bundles; turns and contexts are charged as they are loaded.
func (e *Engine) loadUsage(ctx context.Context) error {
	grants, err := e.as(pgrole.Recovery, "").ListBlobGrants(ctx)
	if err != nil {
		return fmt.Errorf("load blob grants: %w", err)
	}
	for _, r := range grants {
		if len(r.BlobHash) != len(ident.Hash{}) {
			continue
		}
		g := grant{tenant: uint32(r.TenantNo), hash: ident.Hash(r.BlobHash)}
		// A blob missing from the pack lies in a damaged record: nothing
		// to charge; one the tenant stored first, the pack counts.
		if entry, ok := e.blobs.Lookup(g.hash); ok && entry.Owner != g.tenant {
			e.usage.grant(g, int64(entry.RawLen))
		}
	}
	bundles, err := e.as(pgrole.Recovery, "").ListBundleBytes(ctx)
	if err != nil {
		return fmt.Errorf("load registry bundle sizes: %w", err)
	}
	for _, r := range bundles {
		e.usage.add(uint32(r.TenantNo), r.Bytes)
	}
	return nil
}
