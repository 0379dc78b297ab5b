package projection

// The map-based renderer this package had before it streamed: decode to
// Go values with the msgpack library (msgpackreadtest), then render. Tests
// and FuzzProject compare Project with it.

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cardboxhq/cardbox/cxdbcompat/msgpackread/msgpackreadtest"
)

// oracleProject is the old Project.
func oracleProject(payload []byte, d Descriptor, reg Registry, o Options) (oracleResult, error) {
	v, err := msgpackreadtest.Decode(payload, oMaxDepth)
	if err != nil {
		return oracleResult{}, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	m, ok := v.(msgpackreadtest.Map)
	if !ok {
		return oracleResult{}, ErrNotMap
	}
	p := oracleProjector{reg: reg, o: o}
	tags := oTagged(m)
	r := oracleResult{Data: p.fields(tags, d)}
	if o.IncludeUnknown {
		r.Unknown = map[string]any{}
		for tag, val := range tags {
			if _, known := d.Fields[tag]; !known {
				r.Unknown[strconv.FormatUint(tag, 10)] = p.generic(val)
			}
		}
	}
	return r, nil
}

// tagged normalises a map's keys to tags: unsigned integers and decimal
// strings; other keys are dropped, and a later duplicate wins.
func oTagged(m msgpackreadtest.Map) map[uint64]any {
	out := make(map[uint64]any, len(m))
	for _, e := range m {
		switch k := e.Key.(type) {
		case string:
			if n, err := strconv.ParseUint(k, 10, 64); err == nil {
				out[n] = e.Val
			}
		default:
			if n, ok := oUnsigned(k); ok {
				out[n] = e.Val
			}
		}
	}
	return out
}

type oracleProjector struct {
	reg Registry
	o   Options
}

// fields renders the tags d names; absent tags are omitted.
func (p oracleProjector) fields(tags map[uint64]any, d Descriptor) map[string]any {
	data := make(map[string]any, len(d.Fields))
	for tag, f := range d.Fields {
		if v, ok := tags[tag]; ok {
			data[f.Name] = p.field(v, f)
		}
	}
	return data
}

func (p oracleProjector) field(v any, f Field) any {
	if f.Enum != "" {
		if out, ok := p.enum(v, f.Enum); ok {
			return out
		}
	}
	if f.Type == "ref" && f.Ref != "" {
		return p.ref(v, f.Ref)
	}
	return p.typed(v, f.Type, f)
}

func (p oracleProjector) enum(v any, id string) (any, bool) {
	n, ok := oUnsigned(v)
	if !ok || p.reg == nil {
		return nil, false
	}
	labels, ok := p.reg.Enum(id)
	if !ok {
		return nil, false
	}
	label, ok := labels[strconv.FormatUint(n, 10)]
	if !ok {
		return nil, false
	}
	switch p.o.Enum {
	case "number":
		return n, true
	case "both":
		return map[string]any{"label": label, "value": n}, true
	}
	return label, true
}

// typed renders v as the simple type t (items of arrays use f's items).
func (p oracleProjector) typed(v any, t string, f Field) any {
	switch t {
	case "u64", "uint64", "int64":
		if n, ok := oUnsigned(v); ok {
			return p.u64(n)
		}
		return nil
	case "u32", "uint32", "u8", "uint8", "int32":
		if n, ok := oSigned(v); ok {
			return n
		}
		return nil
	case "string":
		if s, ok := v.(string); ok {
			if !utf8.ValidString(s) {
				return ""
			}
			return s
		}
		return nil
	case "bool":
		if b, ok := v.(bool); ok {
			return b
		}
		return nil
	case "bytes", "typed_blob":
		if b, ok := v.(msgpackreadtest.Bin); ok {
			return p.bytes(b)
		}
		return nil
	case "array":
		return p.array(v, f)
	case "unix_ms", "time_ms", "timestamp_ms":
		return p.time(v)
	}
	return p.generic(v)
}

func (p oracleProjector) array(v any, f Field) any {
	items, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]any, len(items))
	for i, it := range items {
		switch {
		case f.Items != nil && f.Items.Ref != "":
			out[i] = p.ref(it, f.Items.Ref)
		case f.Items != nil && f.Items.Type != "":
			out[i] = p.typed(it, f.Items.Type, Field{})
		default:
			out[i] = p.generic(it)
		}
	}
	return out
}

// ref renders a nested type by its latest version.
func (p oracleProjector) ref(v any, typeID string) any {
	m, ok := v.(msgpackreadtest.Map)
	if !ok || p.reg == nil {
		return p.generic(v)
	}
	d, ok := p.reg.Latest(typeID)
	if !ok {
		return p.generic(v)
	}
	return p.fields(oTagged(m), d)
}

func (p oracleProjector) u64(n uint64) any {
	if p.o.U64 == "number" {
		return n
	}
	return strconv.FormatUint(n, 10)
}

func (p oracleProjector) bytes(b []byte) any {
	switch p.o.Bytes {
	case "hex":
		return hex.EncodeToString(b)
	case "len_only":
		return len(b)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// time renders unix milliseconds; out of range is null.
func (p oracleProjector) time(v any) any {
	ms, ok := oSigned(v)
	if !ok {
		return nil
	}
	if p.o.Time == "unix_ms" {
		return ms
	}
	t := time.UnixMilli(ms).UTC()
	if t.Year() < 0 || t.Year() > 9999 {
		return nil
	}
	if ms%1000 == 0 {
		return t.Format("2006-01-02T15:04:05+00:00")
	}
	return t.Format("2006-01-02T15:04:05.999+00:00")
}

// generic renders a value without a type.
func (p oracleProjector) generic(v any) any {
	switch x := v.(type) {
	case nil, bool, string:
		if s, ok := x.(string); ok && !utf8.ValidString(s) {
			return ""
		}
		return x
	case uint64:
		return p.u64(x)
	case int64:
		if x >= 0 {
			return p.u64(uint64(x))
		}
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0
		}
		return x
	case msgpackreadtest.Bin:
		return p.bytes(x)
	case []any:
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = p.generic(it)
		}
		return out
	case msgpackreadtest.Map:
		out := make(map[string]any, len(x))
		for _, e := range x {
			out[oGenericKey(e.Key)] = p.generic(e.Val)
		}
		return out
	}
	return nil // ext types
}

func oGenericKey(k any) string {
	if s, ok := k.(string); ok {
		return s
	}
	if n, ok := oUnsigned(k); ok {
		return strconv.FormatUint(n, 10)
	}
	return ""
}

// oMaxDepth bounds nesting as Project does, so a hostile payload cannot
// exhaust the stack.
const oMaxDepth = 256

// unsigned returns v as a u64 when it is an integer >= 0.
func oUnsigned(v any) (uint64, bool) {
	switch n := v.(type) {
	case uint64:
		return n, true
	case int64:
		return uint64(n), n >= 0
	}
	return 0, false
}

// signed returns v as an i64 when it is an integer that fits one.
func oSigned(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case uint64:
		return int64(n), n <= math.MaxInt64
	}
	return 0, false
}

// oracleResult is what the old Project returned.
type oracleResult struct {
	Data    map[string]any
	Unknown map[string]any
}
