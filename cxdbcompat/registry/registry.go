package registry

import (
	"encoding/hex"
	"slices"

	"github.com/zeebo/blake3"
)

// Registry is an immutable snapshot of the type registry. Any number of
// goroutines may read one at once; Apply never changes its receiver but
// returns a new snapshot, so a reader holding the old one sees a consistent
// state and a refused bundle leaves no trace.
//
// Maps and slices handed out by lookups (Descriptor.Fields, Items, Renderer,
// enum labels) are shared with the snapshot and must not be modified.
type Registry struct {
	types   map[string]*typeEntry
	enums   map[string]map[string]string
	bundles map[string]*storedBundle
	gen     uint64
	last    string
}

// typeEntry is one type: its versions and, per tag, the (type, enum) pair
// first recorded for it, which later versions must keep.
type typeEntry struct {
	versions map[uint32]Descriptor
	order    []uint32 // ascending
	tags     map[uint64]tagSig
}

type tagSig struct{ typ, enum string }

type storedBundle struct {
	raw  []byte
	etag string
}

var empty = &Registry{
	types:   map[string]*typeEntry{},
	enums:   map[string]map[string]string{},
	bundles: map[string]*storedBundle{},
}

// Empty is the registry before any bundle: generation 0.
func Empty() *Registry { return empty }

// Generation counts the bundles created since Empty; an identical republish
// does not count, so equal generations mean equal registries.
func (r *Registry) Generation() uint64 { return r.gen }

// LastBundleID is the id of the most recently created bundle, "" for Empty.
func (r *Registry) LastBundleID() string { return r.last }

// BundleCount is the number of stored bundles.
func (r *Registry) BundleCount() int { return len(r.bundles) }

// TypeCount is the number of types with at least one version.
func (r *Registry) TypeCount() int { return len(r.types) }

// Descriptor looks up one version of a type.
func (r *Registry) Descriptor(typeID string, version uint32) (Descriptor, bool) {
	e, ok := r.types[typeID]
	if !ok {
		return Descriptor{}, false
	}
	d, ok := e.versions[version]
	return d, ok
}

// Latest is the numerically highest registered version of a type.
func (r *Registry) Latest(typeID string) (Descriptor, bool) {
	e, ok := r.types[typeID]
	if !ok {
		return Descriptor{}, false
	}
	return e.versions[e.latest()], true
}

// Enum returns an enum's labels by the decimal string of their values.
func (r *Registry) Enum(id string) (map[string]string, bool) {
	labels, ok := r.enums[id]
	return labels, ok
}

// Bundle returns a copy of a stored bundle's raw body and its ETag: the
// lowercase hex BLAKE3-256 of the body in double quotes, as the header
// carries it.
func (r *Registry) Bundle(id string) (raw []byte, etag string, ok bool) {
	b, ok := r.bundles[id]
	if !ok {
		return nil, "", false
	}
	return slices.Clone(b.raw), b.etag, true
}

// TypeSummary lists one type's versions, for GET /v1/registry/types.
type TypeSummary struct {
	TypeID        string   `json:"type_id"`
	Versions      []uint32 `json:"versions"` // ascending
	LatestVersion uint32   `json:"latest_version"`
}

// Types summarises every type, sorted by type id.
func (r *Registry) Types() []TypeSummary {
	out := make([]TypeSummary, 0, len(r.types))
	for _, id := range sortedKeys(r.types) {
		e := r.types[id]
		out = append(out, TypeSummary{
			TypeID:        id,
			Versions:      slices.Clone(e.order),
			LatestVersion: e.latest(),
		})
	}
	return out
}

// Renderers maps each type to the renderer of its highest version; a type
// whose highest version has none is absent (section 4.8), even when a
// lower version has one.
func (r *Registry) Renderers() map[string]Renderer {
	out := map[string]Renderer{}
	for id, e := range r.types {
		if rd := e.versions[e.latest()].Renderer; rd != nil {
			out[id] = *rd
		}
	}
	return out
}

func (e *typeEntry) latest() uint32 { return e.order[len(e.order)-1] }

func etagOf(raw []byte) string {
	sum := blake3.Sum256(raw)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}
