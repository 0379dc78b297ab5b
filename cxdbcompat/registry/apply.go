package registry

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
)

// Apply ingests a raw bundle body and returns the registry with it.
//
//   - created: next is a new snapshot holding the bundle (HTTP 201).
//   - bundle id already stored with byte-identical body: (r, false, nil),
//     nothing changes (HTTP 204).
//   - error: an *Error of kind ErrMalformed or ErrConflict; next is r,
//     unchanged, because ingest is all-or-nothing.
//
// Checks run in the reference's order (bundle id, enums, types, enum
// references) over sorted keys, so a bundle always meets the same verdict.
// raw is copied; the caller may reuse it.
func (r *Registry) Apply(raw []byte) (next *Registry, created bool, err error) {
	b, err := Parse(raw)
	if err != nil {
		return r, false, err
	}
	if old, ok := r.bundles[b.BundleID]; ok {
		if bytes.Equal(old.raw, raw) {
			return r, false, nil
		}
		e := conflict("", "bundle_id already exists with different content")
		e.BundleID = b.BundleID
		return r, false, e
	}
	n := r.derive()
	if err := n.apply(b); err != nil {
		err.BundleID = b.BundleID
		return r, false, err
	}
	n.bundles[b.BundleID] = &storedBundle{raw: slices.Clone(raw), etag: etagOf(raw)}
	n.gen, n.last = r.gen+1, b.BundleID
	return n, true, nil
}

// derive copies r's top-level maps only; type entries are cloned when a
// bundle touches them, so replaying hundreds of bundles stays cheap.
func (r *Registry) derive() *Registry {
	return &Registry{
		types:   maps.Clone(r.types),
		enums:   maps.Clone(r.enums),
		bundles: maps.Clone(r.bundles),
	}
}

func (r *Registry) apply(b *Bundle) *Error {
	if err := r.mergeEnums(b.Enums); err != nil {
		return err
	}
	for _, id := range sortedKeys(b.Types) {
		if err := r.mergeType(id, b.Types[id]); err != nil {
			return err
		}
	}
	return r.checkEnumRefs(b.Types)
}

func (r *Registry) mergeEnums(enums map[string]map[string]string) *Error {
	for _, id := range sortedKeys(enums) {
		labels := enums[id]
		if old, ok := r.enums[id]; ok && !maps.Equal(old, labels) {
			e := conflict("", fmt.Sprintf("enum %s already exists with different mapping", id))
			e.EnumID = id
			return e
		}
		r.enums[id] = labels
	}
	return nil
}

func (r *Registry) mergeType(id string, versions map[uint32]Descriptor) *Error {
	e := r.types[id].clone()
	for _, v := range slices.Sorted(maps.Keys(versions)) {
		if err := e.merge(id, versions[v]); err != nil {
			return err
		}
	}
	r.types[id] = e
	return nil
}

// merge adds one version to a cloned entry, or checks it against the
// version already there.
func (e *typeEntry) merge(id string, d Descriptor) *Error {
	if old, ok := e.versions[d.Version]; ok {
		return e.remerge(id, old, d)
	}
	if len(e.order) > 0 && d.Version < e.latest() {
		err := conflict(id, fmt.Sprintf("type %s version %d is below its latest version %d", id, d.Version, e.latest()))
		err.Version, err.Latest = u32p(d.Version), u32p(e.latest())
		return err
	}
	if err := e.recordTags(id, d); err != nil {
		return err
	}
	e.versions[d.Version] = d
	e.order = append(e.order, d.Version) // ascending: versions arrive sorted and above latest
	return nil
}

// remerge accepts a version already registered only with identical fields;
// it may bring the renderer the stored version lacks (section 5.2).
func (e *typeEntry) remerge(id string, old, d Descriptor) *Error {
	if !sameFields(old.Fields, d.Fields) {
		err := conflict(id, fmt.Sprintf("type %s version %d differs from existing", id, d.Version))
		err.Version = u32p(d.Version)
		return err
	}
	if old.Renderer == nil && d.Renderer != nil {
		old.Renderer = d.Renderer
		e.versions[d.Version] = old
	}
	return nil
}

// recordTags checks a new version's tags against every version of the type
// and records first sightings.
func (e *typeEntry) recordTags(id string, d Descriptor) *Error {
	for _, tag := range slices.Sorted(maps.Keys(d.Fields)) {
		f := d.Fields[tag]
		sig := tagSig{f.Type, f.Enum}
		if prev, ok := e.tags[tag]; ok && prev != sig {
			err := conflict(id, fmt.Sprintf("tag reuse conflict for type %s tag %d", id, tag))
			err.Version, err.Tag = u32p(d.Version), u64p(tag)
			return err
		}
		e.tags[tag] = sig
	}
	return nil
}

// checkEnumRefs requires every enum a bundle's field names to be known now.
// Versions already stored passed this check when they were created, and
// enums are never removed, so the bundle's own versions are enough.
func (r *Registry) checkEnumRefs(types map[string]map[uint32]Descriptor) *Error {
	for _, id := range sortedKeys(types) {
		versions := types[id]
		for _, v := range slices.Sorted(maps.Keys(versions)) {
			fields := versions[v].Fields
			for _, tag := range slices.Sorted(maps.Keys(fields)) {
				if err := r.checkEnumRef(id, v, tag, fields[tag].Enum); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (r *Registry) checkEnumRef(id string, v uint32, tag uint64, enum string) *Error {
	if enum == "" {
		return nil
	}
	if _, ok := r.enums[enum]; ok {
		return nil
	}
	err := invalid("", fmt.Sprintf("missing enum %s for type %s version %d tag %d", enum, id, v, tag))
	err.TypeID, err.EnumID, err.Version, err.Tag = id, enum, u32p(v), u64p(tag)
	return err
}

// clone copies an entry so the snapshot it came from stays untouched; a
// nil entry (new type) clones to an empty one.
func (e *typeEntry) clone() *typeEntry {
	if e == nil {
		return &typeEntry{versions: map[uint32]Descriptor{}, tags: map[uint64]tagSig{}}
	}
	return &typeEntry{
		versions: maps.Clone(e.versions),
		order:    slices.Clone(e.order),
		tags:     maps.Clone(e.tags),
	}
}

func sameFields(a, b map[uint64]Field) bool {
	return maps.EqualFunc(a, b, sameField)
}

func sameField(a, b Field) bool {
	sa, sb := a, b
	sa.Items, sb.Items = nil, nil
	if sa != sb {
		return false
	}
	if a.Items == nil || b.Items == nil {
		return a.Items == b.Items
	}
	return *a.Items == *b.Items
}
