package registry

// Field is one field of a type version, normalised from a bundle (spec
// section 5.1).
type Field struct {
	Name     string
	Type     string // exact, case-sensitive type string ("string", "u64", "ref", ...)
	Enum     string // enum id, or ""
	Ref      string // type id of a nested type, for type "ref"
	Optional bool   // stored and served; projection ignores it
	Items    *Items // array item spec; nil means items render generically
}

// Items describes the items of an array field: a simple type, or a
// reference to another type when Ref is set.
type Items struct {
	Type string
	Ref  string
}

// Renderer is a type version's UI renderer.
type Renderer struct {
	ESMURL    string
	Component string
	Integrity string
}

// Descriptor is one version of a type: its fields by tag. A Descriptor
// returned by a Registry shares Fields, Items and Renderer with the
// snapshot; treat them as read-only.
type Descriptor struct {
	TypeID   string
	Version  uint32
	Fields   map[uint64]Field
	Renderer *Renderer // nil when the version has none
}
