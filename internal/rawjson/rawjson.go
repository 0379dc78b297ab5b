// Package rawjson splices JSON that is already encoded into an encoded
// object, without encoding/json re-reading it.
//
// encoding/json validates and compacts every json.RawMessage and
// Marshaler result it writes, byte by byte. A page of 64 typed turns is
// 80 KiB of JSON the projection just wrote; re-reading it twice (once per
// turn, once per page) took 40 % of the page's CPU. Callers marshal the
// small fixed part of an object with encoding/json and splice the large
// parts in with this package.
package rawjson

// Field is a member to splice: a name that needs no escaping and a value
// that is valid JSON (the caller's guarantee).
type Field struct {
	Name  string
	Value []byte
}

// AppendFields appends the fields with a non-empty value to obj, an
// encoded JSON object, before its closing brace, and returns the result
// (which may share obj's memory).
func AppendFields(obj []byte, fields ...Field) []byte {
	if len(obj) < 2 || obj[len(obj)-1] != '}' {
		panic("rawjson: not an encoded object")
	}
	need := len(obj)
	for _, f := range fields {
		need += len(f.Name) + len(f.Value) + 4
	}
	closing := len(obj) - 1
	out := obj[:closing]
	if cap(out) < need {
		// One allocation of the final size: the values are large.
		out = append(make([]byte, 0, need), out...)
	}
	for _, f := range fields {
		if len(f.Value) == 0 {
			continue
		}
		if out[len(out)-1] != '{' {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, f.Name...)
		out = append(out, '"', ':')
		out = append(out, f.Value...)
	}
	return append(out, '}')
}

// AppendArray appends items, each valid JSON, as a JSON array.
func AppendArray[T ~[]byte](dst []byte, items []T) []byte {
	need := len(dst) + 2 + len(items)
	for _, it := range items {
		need += len(it)
	}
	if cap(dst) < need {
		dst = append(make([]byte, 0, need), dst...)
	}
	dst = append(dst, '[')
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, it...)
	}
	return append(dst, ']')
}
