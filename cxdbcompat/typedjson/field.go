package typedjson

import (
	"encoding/base64"
	"fmt"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// kind is the encoding a field type string selects.
type kind int

const (
	kGeneric kind = iota
	kInt64
	kTime
	kUint64
	kUint32
	kInt32
	kUint8
	kString
	kBool
	kBytes
	kArray
	kRef
)

// kindOf maps a field's exact, case-sensitive type string to its encoding.
func kindOf(f registry.Field) kind {
	switch f.Type {
	case "int64":
		return kInt64
	case "unix_ms", "time_ms", "timestamp_ms":
		return kTime
	case "u64", "uint64":
		return kUint64
	case "u32", "uint32":
		return kUint32
	case "int32":
		return kInt32
	case "u8", "uint8":
		return kUint8
	case "string":
		return kString
	case "bool":
		return kBool
	case "bytes", "typed_blob":
		return kBytes
	case "array":
		return kArray
	case "ref":
		if f.Ref != "" {
			return kRef
		}
	}
	return kGeneric
}

// isInteger reports whether k encodes a fixed-size integer.
func (k kind) isInteger() bool { return k >= kInt64 && k <= kUint8 }

// field writes v as field f. level is the nesting level v would have if it
// is an object or array.
func (s *state) field(v any, f registry.Field, at *path, level int) error {
	if v == nil {
		s.put(s.enc.EncodeNil())
		return nil
	}
	k := kindOf(f)
	v, err := s.resolveEnum(v, f, k, at)
	if err != nil {
		return err
	}
	switch {
	case k.isInteger():
		return s.integer(v, f, k, at)
	case k == kString, k == kBool, k == kBytes:
		return s.scalar(v, k, at)
	case k == kArray:
		return s.array(v, f, at, level)
	case k == kRef:
		return s.ref(v, f.Ref, at, level)
	}
	return s.generic(v, at, level)
}

// scalar writes a string, bool or bytes field.
func (s *state) scalar(v any, k kind, at *path) error {
	switch k {
	case kString:
		str, ok := v.(string)
		if !ok {
			return typeErr(at, "string", v)
		}
		s.put(s.enc.EncodeString(str))
	case kBool:
		b, ok := v.(bool)
		if !ok {
			return typeErr(at, "boolean", v)
		}
		s.put(s.enc.EncodeBool(b))
	default:
		return s.bytes(v, at)
	}
	return nil
}

// bytes writes a std base64 (padded) string as msgpack bin.
func (s *state) bytes(v any, at *path) error {
	str, ok := v.(string)
	if !ok {
		return typeErr(at, "base64 string", v)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(str)
	if err != nil {
		return fieldErr(at, "invalid base64 (want std, padded)")
	}
	s.put(s.enc.EncodeBytes(b))
	return nil
}

// itemField is the field spec array items are encoded with: a simple type,
// a ref, or (no items spec) generic.
func itemField(f registry.Field) registry.Field {
	switch {
	case f.Items == nil:
		return registry.Field{}
	case f.Items.Ref != "":
		return registry.Field{Type: "ref", Ref: f.Items.Ref}
	}
	return registry.Field{Type: f.Items.Type}
}

// array writes an array field, each item by the field's items spec.
func (s *state) array(v any, f registry.Field, at *path, level int) error {
	arr, ok := v.([]any)
	if !ok {
		return typeErr(at, "array", v)
	}
	if level > MaxDepth {
		return depthErr(at)
	}
	item := itemField(f)
	s.put(s.enc.EncodeArrayLen(len(arr)))
	for i, x := range arr {
		if err := s.field(x, item, at.at(i), level+1); err != nil {
			return err
		}
	}
	return nil
}

// ref writes an object by the latest version of typeID, or generically when
// the registry does not know the type (as the projection renders it).
func (s *state) ref(v any, typeID string, at *path, level int) error {
	n := s.latest(typeID)
	if n == nil {
		return s.generic(v, at, level)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return typeErr(at, fmt.Sprintf("object (type %q)", typeID), v)
	}
	return s.object(obj, n, at, level)
}
