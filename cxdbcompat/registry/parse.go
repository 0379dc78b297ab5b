package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Bundle is a parsed registry bundle (spec section 5.1), normalised: version
// keys and field tags are numbers, items specs are Items or nil.
type Bundle struct {
	RegistryVersion uint32
	BundleID        string
	// Types holds each type's versions; a type listed without versions is
	// absent.
	Types map[string]map[uint32]Descriptor
	// Enums holds each enum's labels by the decimal string of the value.
	Enums map[string]map[string]string
}

// Parse decodes a bundle body. Unknown keys anywhere are ignored; keys are
// visited in sorted order so the error reported for a bundle with several
// faults is always the same one. Every error is an *Error of kind
// ErrMalformed.
func Parse(body []byte) (*Bundle, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, malformed("", "%s", jsonProblem(body, err))
	}
	if top == nil {
		return nil, malformed("", "expected an object, got null")
	}
	b := &Bundle{}
	if err := b.header(top); err != nil {
		return nil, err
	}
	var err error
	if b.Enums, err = parseEnums(top["enums"]); err != nil {
		return nil, err
	}
	if b.Types, err = parseTypes(top["types"]); err != nil {
		return nil, err
	}
	return b, nil
}

// jsonProblem names the shape for an object decoded from another kind of
// JSON value, the usual fault of documentation-format bundles.
func jsonProblem(body []byte, err error) string {
	if json.Valid(body) {
		return "expected an object, got " + kindOf(body)
	}
	return err.Error()
}

func (b *Bundle) header(top map[string]json.RawMessage) error {
	raw, ok := top["registry_version"]
	if !ok || isNull(raw) {
		return malformed("", "missing registry_version")
	}
	if err := json.Unmarshal(raw, &b.RegistryVersion); err != nil {
		return malformed("registry_version", "expected an unsigned 32-bit integer, got %s", brief(raw))
	}
	if b.RegistryVersion == 0 {
		return invalid("registry_version", "registry_version must be > 0")
	}
	id, err := requiredString(top, "bundle_id", "")
	if err != nil {
		return err
	}
	if id == "" {
		// An empty id cannot be addressed by GET /v1/registry/bundles/{id}.
		return malformed("bundle_id", "must not be empty")
	}
	b.BundleID = id
	return nil
}

func parseEnums(raw json.RawMessage) (map[string]map[string]string, error) {
	obj, err := object(raw, "enums")
	if err != nil {
		return nil, err
	}
	enums := make(map[string]map[string]string, len(obj))
	for _, id := range sortedKeys(obj) {
		path := "enums" + key(id)
		var labels map[string]string
		if _, err := object(obj[id], path); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(obj[id], &labels); err != nil {
			return nil, malformed(path, "labels must be strings")
		}
		if labels == nil {
			labels = map[string]string{}
		}
		enums[id] = labels
	}
	return enums, nil
}

func parseTypes(raw json.RawMessage) (map[string]map[uint32]Descriptor, error) {
	obj, err := object(raw, "types")
	if err != nil {
		return nil, err
	}
	types := make(map[string]map[uint32]Descriptor, len(obj))
	for _, id := range sortedKeys(obj) {
		versions, err := parseType(id, obj[id])
		if err != nil {
			return nil, err
		}
		if len(versions) > 0 {
			types[id] = versions
		}
	}
	return types, nil
}

func parseType(id string, raw json.RawMessage) (map[uint32]Descriptor, error) {
	path := "types" + key(id)
	obj, err := object(raw, path)
	if err != nil {
		return nil, err
	}
	path += ".versions"
	vobj, err := object(obj["versions"], path)
	if err != nil {
		return nil, err
	}
	versions := make(map[uint32]Descriptor, len(vobj))
	seen := map[uint32]string{}
	for _, k := range sortedKeys(vobj) {
		v, err := versionKey(id, path, k, seen)
		if err != nil {
			return nil, err
		}
		d, err := parseVersion(id, v, path+key(k), vobj[k])
		if err != nil {
			return nil, err
		}
		versions[v] = d
	}
	return versions, nil
}

func versionKey(id, path, k string, seen map[uint32]string) (uint32, error) {
	n, err := strconv.ParseUint(k, 10, 32)
	if err != nil {
		e := invalid(path, fmt.Sprintf("invalid type version %q at %s", k, path))
		e.TypeID = id
		return 0, e
	}
	v := uint32(n)
	if prev, dup := seen[v]; dup {
		e := malformed(path, "keys %q and %q are both version %d", prev, k, v)
		e.TypeID, e.Version = id, u32p(v)
		return 0, e
	}
	seen[v] = k
	return v, nil
}

func parseVersion(id string, v uint32, path string, raw json.RawMessage) (Descriptor, error) {
	obj, err := object(raw, path)
	if err != nil {
		return Descriptor{}, err
	}
	d := Descriptor{TypeID: id, Version: v}
	if d.Fields, err = parseFields(path+".fields", obj["fields"]); err != nil {
		return Descriptor{}, err
	}
	if d.Renderer, err = parseRenderer(path+".renderer", obj["renderer"]); err != nil {
		return Descriptor{}, err
	}
	return d, nil
}

func parseFields(path string, raw json.RawMessage) (map[uint64]Field, error) {
	obj, err := object(raw, path)
	if err != nil {
		return nil, err
	}
	fields := make(map[uint64]Field, len(obj))
	seen := map[uint64]string{}
	for _, k := range sortedKeys(obj) {
		tag, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			return nil, invalid(path, fmt.Sprintf("invalid field tag %q at %s", k, path))
		}
		if prev, dup := seen[tag]; dup {
			return nil, malformed(path, "keys %q and %q are both tag %d", prev, k, tag)
		}
		seen[tag] = k
		if fields[tag], err = parseField(path+key(k), obj[k]); err != nil {
			return nil, err
		}
	}
	return fields, nil
}

func parseField(path string, raw json.RawMessage) (Field, error) {
	obj, err := object(raw, path)
	if err != nil {
		return Field{}, err
	}
	if obj == nil {
		return Field{}, malformed(path, "expected an object, got null")
	}
	var f Field
	if f.Name, err = requiredString(obj, "name", path); err != nil {
		return Field{}, err
	}
	if f.Type, err = requiredString(obj, "type", path); err != nil {
		return Field{}, err
	}
	if f.Enum, err = optionalString(obj, "enum", path); err != nil {
		return Field{}, err
	}
	if f.Ref, err = optionalString(obj, "ref", path); err != nil {
		return Field{}, err
	}
	if f.Optional, err = optionalBool(obj, "optional", path); err != nil {
		return Field{}, err
	}
	f.Items = parseItems(obj["items"])
	return f, nil
}

// parseItems normalises an items spec as section 5.1 says; anything it does
// not recognise means "no items spec", not an error.
func parseItems(raw json.RawMessage) *Items {
	var s string
	if json.Unmarshal(raw, &s) == nil && kindOf(raw) == "a string" {
		return &Items{Type: s}
	}
	var obj struct {
		Type any `json:"type"`
		Ref  any `json:"ref"`
	}
	if kindOf(raw) != "an object" || json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	t, ok := obj.Type.(string)
	if !ok {
		return nil
	}
	if t != "ref" {
		return &Items{Type: t}
	}
	if ref, ok := obj.Ref.(string); ok {
		return &Items{Type: "ref", Ref: ref}
	}
	return nil
}

func parseRenderer(path string, raw json.RawMessage) (*Renderer, error) {
	obj, err := object(raw, path)
	if err != nil || obj == nil {
		return nil, err
	}
	var r Renderer
	if r.ESMURL, err = requiredString(obj, "esm_url", path); err != nil {
		return nil, err
	}
	if r.Component, err = optionalString(obj, "component", path); err != nil {
		return nil, err
	}
	if r.Integrity, err = optionalString(obj, "integrity", path); err != nil {
		return nil, err
	}
	return &r, nil
}

// object decodes a JSON object; absent and null give a nil map, as an
// omitted optional section does.
func object(raw json.RawMessage, path string) (map[string]json.RawMessage, error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if kindOf(raw) != "an object" || json.Unmarshal(raw, &obj) != nil {
		return nil, malformed(path, "expected an object, got %s", kindOf(raw))
	}
	return obj, nil
}

func requiredString(obj map[string]json.RawMessage, k, path string) (string, error) {
	raw, ok := obj[k]
	if !ok || isNull(raw) {
		return "", malformed(path, "missing %s", k)
	}
	return optionalString(obj, k, path)
}

func optionalString(obj map[string]json.RawMessage, k, path string) (string, error) {
	raw, ok := obj[k]
	if !ok || isNull(raw) {
		return "", nil
	}
	var s string
	if kindOf(raw) != "a string" || json.Unmarshal(raw, &s) != nil {
		return "", malformed(join(path, k), "expected a string, got %s", kindOf(raw))
	}
	return s, nil
}

func optionalBool(obj map[string]json.RawMessage, k, path string) (bool, error) {
	raw, ok := obj[k]
	if !ok || isNull(raw) {
		return false, nil
	}
	var b bool
	if kindOf(raw) != "a boolean" || json.Unmarshal(raw, &b) != nil {
		return false, malformed(join(path, k), "expected a boolean, got %s", kindOf(raw))
	}
	return b, nil
}

// kindOf names the kind of a valid JSON value by its first byte.
func kindOf(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// brief quotes a short value and names the kind of a long one.
func brief(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 32 {
		return kindOf(raw)
	}
	return string(raw)
}

func isNull(raw []byte) bool { return kindOf(raw) == "null" }

// key renders an object key as a path step: ["cxdb.Item"].
func key(k string) string { return "[" + strconv.Quote(k) + "]" }

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
