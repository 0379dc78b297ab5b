package typedjson

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// generic writes a value with no type information, as the Go client would
// write the equivalent any/map value: objects as maps with sorted string
// keys, arrays, integers in their smallest msgpack form, other numbers as
// float64, strings, bools and nil. level is the nesting level v would have
// if it is an object or array.
func (s *state) generic(v any, at *path, level int) error {
	switch x := v.(type) {
	case nil:
		s.put(s.enc.EncodeNil())
	case bool:
		s.put(s.enc.EncodeBool(x))
	case string:
		s.put(s.enc.EncodeString(x))
	case json.Number:
		return s.genericNumber(x, at)
	case []any:
		return s.genericArray(x, at, level)
	case map[string]any:
		return s.genericMap(x, at, level)
	default:
		return fieldErr(at, fmt.Sprintf("unsupported value %T", v))
	}
	return nil
}

// genericNumber writes an integer literal compactly and any other number
// as float64. Integers beyond 64 bits and floats beyond float64 are errors
// rather than silently rounded.
func (s *state) genericNumber(num json.Number, at *path) error {
	text := string(num)
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		s.put(s.enc.EncodeInt(n))
		return nil
	}
	if u, err := strconv.ParseUint(text, 10, 64); err == nil {
		s.put(s.enc.EncodeUint(u))
		return nil
	}
	if !strings.ContainsAny(text, ".eE") {
		return fieldErr(at, "integer out of 64-bit range")
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return fieldErr(at, "number out of float64 range")
	}
	s.put(s.enc.EncodeFloat64(f))
	return nil
}

func (s *state) genericArray(arr []any, at *path, level int) error {
	if level > MaxDepth {
		return depthErr(at)
	}
	s.put(s.enc.EncodeArrayLen(len(arr)))
	for i, x := range arr {
		if err := s.generic(x, at.at(i), level+1); err != nil {
			return err
		}
	}
	return nil
}

func (s *state) genericMap(obj map[string]any, at *path, level int) error {
	if level > MaxDepth {
		return depthErr(at)
	}
	s.put(s.enc.EncodeMapLen(len(obj)))
	for _, k := range sortedKeys(obj) {
		s.put(s.enc.EncodeString(k))
		if err := s.generic(obj[k], at.key(k), level+1); err != nil {
			return err
		}
	}
	return nil
}
