package store

import (
	"context"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
)

// MaxMissingBlobs is the most hashes one MissingBlobs call checks.
const MaxMissingBlobs = 10_000

// MissingBlobs returns those of hashes the tenant cannot read (as GetBlob
// would answer not found), in the order given. As ownsBlob does, it asks
// Postgres about every hash the tenant did not store first, in one
// query, whether or not anyone stored it: bytes only another tenant
// stored are missing for this one, and take the same path as bytes
// nobody stored, so neither the answer nor its time tells them apart.
func (e *Engine) MissingBlobs(ctx context.Context, t ident.Tenant, hashes []ident.Hash) ([]ident.Hash, error) {
	if len(hashes) > MaxMissingBlobs {
		return nil, fault.New(fault.Invalid, "%d hashes: at most %d per request", len(hashes), MaxMissingBlobs)
	}
	if e.gate.Gone(t.No) {
		return hashes, nil
	}
	present := make([]bool, len(hashes))
	stored := make([]bool, len(hashes)) // by another tenant first
	var ask [][]byte                    // hashes whose reading depends on a grant
	for i, h := range hashes {
		entry, ok := e.blobs.Lookup(h)
		if !ok {
			if hole, damaged := e.blobs.HoleOf(h); damaged {
				entry, ok = blobpack.Entry{Hash: h, Owner: hole.Owner}, true
			}
		}
		if ok && entry.Owner == t.No && !e.released(t, h) {
			present[i] = true
			continue
		}
		stored[i] = ok
		ask = append(ask, h[:])
	}
	if len(ask) > 0 {
		rows, err := e.as(pgrole.Tenant, t.ID).TenantBlobsAmong(ctx, storedb.TenantBlobsAmongParams{TenantID: t.ID, BlobHashes: ask})
		if err != nil {
			return nil, fault.Wrap(fault.Unavailable, err, "look up %d blobs", len(ask))
		}
		granted := make(map[ident.Hash]bool, len(rows))
		for _, r := range rows {
			if len(r) == len(ident.Hash{}) {
				granted[ident.Hash(r)] = true
			}
		}
		for i, h := range hashes {
			present[i] = present[i] || (stored[i] && granted[h])
		}
	}
	var missing []ident.Hash
	for i, h := range hashes {
		if !present[i] {
			missing = append(missing, h)
		}
	}
	return missing, nil
}
