package store

import (
	"context"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// Bundle is a type registry bundle as published.
type Bundle struct {
	ID   string
	Body []byte
}

// RegistryBundles returns the tenant's bundles in publish order.
func (e *Engine) RegistryBundles(ctx context.Context, t ident.Tenant) ([]Bundle, error) {
	if e.gate.Gone(t.No) {
		return nil, nil
	}
	rows, err := e.as(pgrole.Tenant, t.ID).ListRegistryBundles(ctx, t.ID)
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "load registry bundles")
	}
	out := make([]Bundle, len(rows))
	for i, r := range rows {
		out[i] = Bundle{ID: r.BundleID, Body: r.Body}
	}
	return out, nil
}

// AddRegistryBundle stores a bundle; stored is false when a bundle with
// that id exists already.
func (e *Engine) AddRegistryBundle(ctx context.Context, t ident.Tenant, b Bundle) (stored bool, err error) {
	if err := e.admit(t); err != nil {
		return false, err
	}
	defer e.gate.Leave()
	if err := e.checkQuota(ctx, t, int64(len(b.Body))); err != nil {
		return false, err
	}
	n, err := e.as(pgrole.Tenant, t.ID).InsertRegistryBundle(ctx, db.InsertRegistryBundleParams{TenantID: t.ID, BundleID: b.ID, Body: b.Body})
	if err != nil {
		return false, fault.Wrap(fault.Unavailable, err, "store registry bundle %q", b.ID)
	}
	if n == 1 {
		e.usage.add(t.No, int64(len(b.Body)))
	}
	return n == 1, nil
}

// ContextMeta is a context's metadata as stored: what the first turn of its
// chain said (nil/empty when it said nothing of it). Provenance is JSON.
type ContextMeta struct {
	ClientTag  *string
	Title      *string
	Labels     []string
	Provenance []byte
}

// SaveRootMetadata records the metadata of root turn (nil: it has none) and
// makes root the chain root of contexts; a root's metadata, once recorded,
// is not replaced.
func (e *Engine) SaveRootMetadata(ctx context.Context, t ident.Tenant, root uint64, contexts []uint64, m *ContextMeta) error {
	if err := e.admit(t); err != nil {
		return err
	}
	defer e.gate.Leave()
	ids := make([]int64, len(contexts))
	for i, c := range contexts {
		ids[i] = int64(c)
	}
	p := db.InsertTurnMetadataParams{TenantID: t.ID, TurnID: int64(root), ContextIds: ids, Found: m != nil}
	if m != nil {
		p.ClientTag, p.Title = optText(m.ClientTag), optText(m.Title)
		p.Labels, p.Provenance = m.Labels, m.Provenance
	}
	if err := e.as(pgrole.Tenant, t.ID).InsertTurnMetadata(ctx, p); err != nil {
		return fault.Wrap(fault.Unavailable, err, "save metadata of turn %d", root)
	}
	return nil
}

func optText(s *string) pgtype.Text {
	if s == nil {
		return pgtype.Text{}
	}
	return pgtype.Text{String: *s, Valid: true}
}

func textPtr(t pgtype.Text) *string {
	if !t.Valid {
		return nil
	}
	return &t.String
}

// PendingMetadata is a context whose chain root's metadata was never
// looked for.
type PendingMetadata struct {
	Tenant    ident.Tenant
	ContextID uint64
}

// ContextsWithoutMetadata returns up to max contexts that have turns but
// whose metadata was never extracted.
func (e *Engine) ContextsWithoutMetadata(ctx context.Context, max int) ([]PendingMetadata, error) {
	rows, err := e.as(pgrole.Recovery, "").ListContextsWithoutMetadata(ctx, int32(max))
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "list contexts without metadata")
	}
	out := make([]PendingMetadata, len(rows))
	for i, r := range rows {
		out[i] = PendingMetadata{Tenant: ident.Tenant{ID: r.TenantID, No: uint32(r.TenantNo)}, ContextID: uint64(r.ContextID)}
	}
	return out, nil
}

// Metadata returns the metadata of the given contexts of the tenant (all
// of them when ids is nil); contexts without any are absent.
func (e *Engine) Metadata(ctx context.Context, t ident.Tenant, ids []uint64) (map[uint64]ContextMeta, error) {
	if e.gate.Gone(t.No) {
		return map[uint64]ContextMeta{}, nil
	}
	rows, err := e.as(pgrole.Tenant, t.ID).ContextMetadata(ctx, db.ContextMetadataParams{TenantID: t.ID, ContextIds: contextIDs(ids)})
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "load context metadata")
	}
	out := make(map[uint64]ContextMeta, len(rows))
	for _, r := range rows {
		out[uint64(r.ContextID)] = ContextMeta{ClientTag: textPtr(r.ClientTag), Title: textPtr(r.Title), Labels: r.Labels, Provenance: r.Provenance}
	}
	return out, nil
}

// MetadataSizes returns the bytes of the metadata of the given contexts
// of the tenant (all of them when ids is nil), as Postgres measures them
// without sending them; contexts without metadata are absent. Lists and
// searches load metadata in batches these sizes bound.
func (e *Engine) MetadataSizes(ctx context.Context, t ident.Tenant, ids []uint64) (map[uint64]int64, error) {
	if e.gate.Gone(t.No) {
		return map[uint64]int64{}, nil
	}
	rows, err := e.as(pgrole.Tenant, t.ID).ContextMetadataSizes(ctx, db.ContextMetadataSizesParams{TenantID: t.ID, ContextIds: contextIDs(ids)})
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "measure context metadata")
	}
	out := make(map[uint64]int64, len(rows))
	for _, r := range rows {
		out[uint64(r.ContextID)] = r.Size
	}
	return out, nil
}

// contextIDs is ids as Postgres bigints; nil stays nil (all contexts).
func contextIDs(ids []uint64) []int64 {
	if ids == nil {
		return nil
	}
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}
