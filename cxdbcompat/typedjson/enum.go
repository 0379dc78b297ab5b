package typedjson

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// enumIndex is an enum's mapping in both directions. Only canonical decimal
// values are indexed: the projection looks labels up by str(value).
type enumIndex struct {
	labels map[string]string // decimal value → label
	values map[string]uint64 // label → lowest value carrying it
}

// enum returns the index of enum id, or nil when it is unknown.
func (s *state) enum(id string) *enumIndex {
	if idx, ok := s.enums[id]; ok {
		return idx
	}
	var idx *enumIndex
	if s.types != nil {
		if labels, ok := s.types.Enum(id); ok {
			idx = newEnumIndex(labels)
		}
	}
	s.enums[id] = idx
	return idx
}

func newEnumIndex(labels map[string]string) *enumIndex {
	idx := &enumIndex{labels: map[string]string{}, values: map[string]uint64{}}
	for key, label := range labels {
		n, err := strconv.ParseUint(key, 10, 64)
		if err != nil || strconv.FormatUint(n, 10) != key {
			continue
		}
		idx.labels[key] = label
		if old, ok := idx.values[label]; !ok || n < old {
			idx.values[label] = n
		}
	}
	return idx
}

// resolveEnum turns an enum label, or the {"label","value"} rendering, into
// the enum's integer (as a json.Number, then encoded by the field's type).
// It applies to integer and generic fields whose enum is known; anything
// else passes through to the type rules unchanged.
func (s *state) resolveEnum(v any, f registry.Field, k kind, at *path) (any, error) {
	if f.Enum == "" || !(k.isInteger() || k == kGeneric) {
		return v, nil
	}
	idx := s.enum(f.Enum)
	if idx == nil {
		return v, nil
	}
	switch x := v.(type) {
	case string:
		if n, ok := idx.values[x]; ok {
			return number(n), nil
		}
	case map[string]any:
		if isEnumPair(x) {
			return idx.pair(x, f.Enum, at)
		}
	}
	return v, nil
}

func number(n uint64) json.Number { return json.Number(strconv.FormatUint(n, 10)) }

// isEnumPair reports whether obj has the shape of the "both" enum
// rendering: only "label" and/or "value" keys.
func isEnumPair(obj map[string]any) bool {
	if len(obj) == 0 || len(obj) > 2 {
		return false
	}
	for k := range obj {
		if k != "label" && k != "value" {
			return false
		}
	}
	return true
}

// pair resolves {"label":..,"value":..}; when both are given they must
// agree.
func (idx *enumIndex) pair(obj map[string]any, id string, at *path) (any, error) {
	label, hasLabel := obj["label"]
	str, ok := label.(string)
	if hasLabel && !ok {
		return nil, typeErr(at.key("label"), "string", label)
	}
	value, hasValue := obj["value"]
	if !hasValue {
		n, ok := idx.values[str]
		if !ok {
			return nil, fieldErr(at, fmt.Sprintf("unknown label %q for enum %q", str, id))
		}
		return number(n), nil
	}
	num, ok := value.(json.Number)
	if !ok {
		return nil, typeErr(at.key("value"), "integer", value)
	}
	if hasLabel && idx.labels[canonical(num)] != str {
		return nil, fieldErr(at, fmt.Sprintf("label %q does not match value %s of enum %q", str, num, id))
	}
	return num, nil
}

// canonical returns the decimal text of an integral number, or "" when it
// is not a non-negative 64-bit integer.
func canonical(num json.Number) string {
	text, err := integerText(string(num))
	if err != nil {
		return ""
	}
	n, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return ""
	}
	return strconv.FormatUint(n, 10)
}
