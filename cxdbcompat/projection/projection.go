// Package projection renders a turn's msgpack payload as JSON through a
// type descriptor of the CXDB type registry, as spec section 5.3 describes:
// numeric tags become field names, each value rendered by its field's type,
// nested types by their latest version. It knows nothing of storage or
// HTTP, so the HTTP API and SQL analytics share it.
package projection

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// Descriptor and Field are the registry's.
type (
	Descriptor = registry.Descriptor
	Field      = registry.Field
)

// Registry is what projection needs of the type registry.
type Registry interface {
	// Latest is the highest registered version of a type.
	Latest(typeID string) (Descriptor, bool)
	// Enum is an enum's labels by the decimal string of their values.
	Enum(id string) (map[string]string, bool)
}

// Options choose how values render; the zero Options are the reference's
// defaults (bytes base64, u64 string, enum label, time iso, no unknowns).
type Options struct {
	Bytes          string // "base64" (default), "hex", "len_only"
	U64            string // "string" (default), "number"
	Enum           string // "label" (default), "number", "both"
	Time           string // "iso" (default), "unix_ms"
	IncludeUnknown bool
}

// Result is a projected payload.
type Result struct {
	Data map[string]any
	// Unknown holds the tags the descriptor does not name, when asked for.
	Unknown map[string]any
}

// Errors of Project; both are 422 for the HTTP API.
var (
	ErrDecode = errors.New("msgpack decode error")
	ErrNotMap = errors.New("payload is not a map")
)

// Project renders payload through d.
func Project(payload []byte, d Descriptor, reg Registry, o Options) (Result, error) {
	v, err := decode(payload)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrDecode, err)
	}
	m, ok := v.(mapValue)
	if !ok {
		return Result{}, ErrNotMap
	}
	p := projector{reg: reg, o: o}
	tags := tagged(m)
	r := Result{Data: p.fields(tags, d)}
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
func tagged(m mapValue) map[uint64]any {
	out := make(map[uint64]any, len(m))
	for _, e := range m {
		switch k := e.key.(type) {
		case string:
			if n, err := strconv.ParseUint(k, 10, 64); err == nil {
				out[n] = e.val
			}
		default:
			if n, ok := unsigned(k); ok {
				out[n] = e.val
			}
		}
	}
	return out
}

type projector struct {
	reg Registry
	o   Options
}

// fields renders the tags d names; absent tags are omitted.
func (p projector) fields(tags map[uint64]any, d Descriptor) map[string]any {
	data := make(map[string]any, len(d.Fields))
	for tag, f := range d.Fields {
		if v, ok := tags[tag]; ok {
			data[f.Name] = p.field(v, f)
		}
	}
	return data
}

func (p projector) field(v any, f Field) any {
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

func (p projector) enum(v any, id string) (any, bool) {
	n, ok := unsigned(v)
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
func (p projector) typed(v any, t string, f Field) any {
	switch t {
	case "u64", "uint64", "int64":
		if n, ok := unsigned(v); ok {
			return p.u64(n)
		}
		return nil
	case "u32", "uint32", "u8", "uint8", "int32":
		if n, ok := signed(v); ok {
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
		if b, ok := v.(binValue); ok {
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

func (p projector) array(v any, f Field) any {
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
func (p projector) ref(v any, typeID string) any {
	m, ok := v.(mapValue)
	if !ok || p.reg == nil {
		return p.generic(v)
	}
	d, ok := p.reg.Latest(typeID)
	if !ok {
		return p.generic(v)
	}
	return p.fields(tagged(m), d)
}

func (p projector) u64(n uint64) any {
	if p.o.U64 == "number" {
		return n
	}
	return strconv.FormatUint(n, 10)
}

func (p projector) bytes(b []byte) any {
	switch p.o.Bytes {
	case "hex":
		return hex.EncodeToString(b)
	case "len_only":
		return len(b)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// time renders unix milliseconds; out of range is null.
func (p projector) time(v any) any {
	ms, ok := signed(v)
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
func (p projector) generic(v any) any {
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
	case binValue:
		return p.bytes(x)
	case []any:
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = p.generic(it)
		}
		return out
	case mapValue:
		out := make(map[string]any, len(x))
		for _, e := range x {
			out[genericKey(e.key)] = p.generic(e.val)
		}
		return out
	}
	return nil // ext types
}

func genericKey(k any) string {
	if s, ok := k.(string); ok {
		return s
	}
	if n, ok := unsigned(k); ok {
		return strconv.FormatUint(n, 10)
	}
	return ""
}
