package store

import (
	"context"
	"fmt"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/internal/usage"
)

// Storage accounting (package usage says what is charged, and why it is
// derived at every start rather than kept in Postgres): the engine asks
// Options.Quota before every write that adds to a tenant's storage.

// TurnCharge is what a turn costs beside its payload: the size of its
// record in turns.log, which also stands for its Postgres rows.
const TurnCharge = usage.TurnCharge

// ContextCharge is what a context (or fork) costs: like a turn.
const ContextCharge = usage.ContextCharge

// QuotaFunc decides whether tenant t may store adding more bytes; stored
// is what the turn store holds for it (Engine.Usage). It returns nil to let
// the write through, else the error that refuses it, of kind
// fault.QuotaExceeded (internal/quota's Exceeded).
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

// Usage returns the bytes tenant t stores in the turn store (see package
// usage): exact for what is durable, not counting writes in
// flight.
func (e *Engine) Usage(t ident.Tenant) int64 {
	return e.blobs.OwnerBytes(t.No) + e.usage.Of(t.No)
}

// CheckQuota asks Options.Quota whether t may store adding more bytes,
// for a write beside the store (a registry bundle) that is charged with
// Charge once it is durable.
func (e *Engine) CheckQuota(ctx context.Context, t ident.Tenant, adding int64) error {
	return e.checkQuota(ctx, t, adding)
}

// Charge adds the bytes of a registry bundle just stored to what t
// stores; start-up counts them from the bundles' rows (see loadUsage).
func (e *Engine) Charge(t ident.Tenant, bytes int64) { e.usage.Add(t.No, bytes) }

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
	if entry, ok := e.blobs.Lookup(h); !ok || ((entry.Owner != t.No || e.released(t, h)) && !e.usage.Granted(usage.Grant{Tenant: t.No, Hash: h})) {
		adding += int64(size)
	}
	return e.checkQuota(ctx, t, adding)
}

// loadUsage charges, at start-up, the committed grants and registry
// bundles; turns and contexts are charged as they are loaded.
func (e *Engine) loadUsage(ctx context.Context) error {
	if err := e.loadReleasedClaims(ctx); err != nil {
		return err
	}
	grants, err := e.as(pgrole.Recovery, "").ListBlobGrants(ctx)
	if err != nil {
		return fmt.Errorf("load blob grants: %w", err)
	}
	for _, r := range grants {
		if len(r.BlobHash) != len(ident.Hash{}) {
			continue
		}
		g := usage.Grant{Tenant: uint32(r.TenantNo), Hash: ident.Hash(r.BlobHash)}
		// A blob missing from the pack lies in a damaged record: nothing
		// to charge; one the tenant stored first, the pack counts, unless
		// it released that claim (and claimed the bytes again since).
		if entry, ok := e.blobs.Lookup(g.Hash); ok && (entry.Owner != g.Tenant || e.usage.Released(g)) {
			e.usage.Grant(g, int64(entry.RawLen))
		}
	}
	bundles, err := e.as(pgrole.Recovery, "").ListBundleBytes(ctx)
	if err != nil {
		return fmt.Errorf("load registry bundle sizes: %w", err)
	}
	for _, r := range bundles {
		e.usage.Add(uint32(r.TenantNo), r.Bytes)
	}
	return nil
}
