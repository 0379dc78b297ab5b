// Package metastore stores what CXDB keeps beside the turns: the type
// registry bundles tenants publish and the metadata of contexts (what the
// first turn of a context's chain said of it). It is rows in Postgres
// only; the turn store (package store) admits its writes, charges them to
// the tenant's storage and refuses them for a deleted tenant, through
// Tenancy.
package metastore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgbound"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
	"github.com/cardboxhq/cardbox/store"
)

// Tenancy is what the metadata storage needs of the turn store
// (*store.Engine): its tenant gate, so that a deleted tenant neither
// reads nor writes any, and its storage accounting, so that bundles count
// against the tenant's quota as the rest of what it stores does.
type Tenancy interface {
	// Admit lets a write of tenant t in, or refuses it as for a tenant
	// that does not exist; an admitted write ends with Leave.
	Admit(t ident.Tenant) error
	Leave()
	// Forgotten reports whether t was deleted.
	Forgotten(t ident.Tenant) bool
	// CheckQuota refuses a write adding bytes that would take t over its
	// storage quota.
	CheckQuota(ctx context.Context, t ident.Tenant, adding int64) error
	// Charge adds bytes to what t stores.
	Charge(t ident.Tenant, bytes int64)
}

// Store is the metadata storage.
type Store struct {
	pool    *pgxpool.Pool
	timeout time.Duration // of each statement on a request's path
	tenancy Tenancy
}

// New returns the metadata storage in pool's database. Each statement a
// request sends must be answered within pgTimeout (store.DefaultPGTimeout
// when not positive), as the turn store's are.
func New(pool *pgxpool.Pool, pgTimeout time.Duration, tenancy Tenancy) *Store {
	if pgTimeout <= 0 {
		pgTimeout = store.DefaultPGTimeout
	}
	return &Store{pool: pool, timeout: pgTimeout, tenancy: tenancy}
}

// as returns the queries of a Postgres role, bounded like the turn
// store's: a request's statements end within the timeout, recovery's scans
// are not bounded.
func (s *Store) as(role pgrole.Role, tenant string) *db.Queries {
	if role == pgrole.Recovery {
		return db.New(pgrole.As(s.pool, role, tenant))
	}
	return db.New(pgrole.As(pgbound.Batcher{D: s.pool, Timeout: s.timeout}, role, tenant))
}

// Bundle is a type registry bundle as published.
type Bundle struct {
	ID   string
	Body []byte
}

// RegistryBundles returns the tenant's bundles in publish order.
func (s *Store) RegistryBundles(ctx context.Context, t ident.Tenant) ([]Bundle, error) {
	if s.tenancy.Forgotten(t) {
		return nil, nil
	}
	rows, err := s.as(pgrole.Tenant, t.ID).ListRegistryBundles(ctx, t.ID)
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
// that id exists already. The body's bytes are charged to the tenant.
func (s *Store) AddRegistryBundle(ctx context.Context, t ident.Tenant, b Bundle) (stored bool, err error) {
	if err := s.tenancy.Admit(t); err != nil {
		return false, err
	}
	defer s.tenancy.Leave()
	if err := s.tenancy.CheckQuota(ctx, t, int64(len(b.Body))); err != nil {
		return false, err
	}
	n, err := s.as(pgrole.Tenant, t.ID).InsertRegistryBundle(ctx, db.InsertRegistryBundleParams{TenantID: t.ID, BundleID: b.ID, Body: b.Body})
	if err != nil {
		return false, fault.Wrap(fault.Unavailable, err, "store registry bundle %q", b.ID)
	}
	if n == 1 {
		s.tenancy.Charge(t, int64(len(b.Body)))
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
func (s *Store) SaveRootMetadata(ctx context.Context, t ident.Tenant, root uint64, contexts []uint64, m *ContextMeta) error {
	if err := s.tenancy.Admit(t); err != nil {
		return err
	}
	defer s.tenancy.Leave()
	ids := make([]int64, len(contexts))
	for i, c := range contexts {
		ids[i] = int64(c)
	}
	p := db.InsertTurnMetadataParams{TenantID: t.ID, TurnID: int64(root), ContextIds: ids, Found: m != nil}
	if m != nil {
		p.ClientTag, p.Title = optText(m.ClientTag), optText(m.Title)
		p.Labels, p.Provenance = m.Labels, m.Provenance
	}
	if err := s.as(pgrole.Tenant, t.ID).InsertTurnMetadata(ctx, p); err != nil {
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
func (s *Store) ContextsWithoutMetadata(ctx context.Context, max int) ([]PendingMetadata, error) {
	rows, err := s.as(pgrole.Recovery, "").ListContextsWithoutMetadata(ctx, int32(max))
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
func (s *Store) Metadata(ctx context.Context, t ident.Tenant, ids []uint64) (map[uint64]ContextMeta, error) {
	if s.tenancy.Forgotten(t) {
		return map[uint64]ContextMeta{}, nil
	}
	rows, err := s.as(pgrole.Tenant, t.ID).ContextMetadata(ctx, db.ContextMetadataParams{TenantID: t.ID, ContextIds: contextIDs(ids)})
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
func (s *Store) MetadataSizes(ctx context.Context, t ident.Tenant, ids []uint64) (map[uint64]int64, error) {
	if s.tenancy.Forgotten(t) {
		return map[uint64]int64{}, nil
	}
	rows, err := s.as(pgrole.Tenant, t.ID).ContextMetadataSizes(ctx, db.ContextMetadataSizesParams{TenantID: t.ID, ContextIds: contextIDs(ids)})
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

var _ Tenancy = (*store.Engine)(nil)
