package projection

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/msgpackread"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// Rendering, spec section 5.3: each function renders the value whose head
// it is given, at depth, reading the items of a container from p.r and
// writing JSON to p.buf. A value a type does not accept renders null, and
// its items are still read and checked.

// fields renders the n entries of a map through d: an object of the
// fields d names, by name.
func (p *projector) fields(n uint64, d *Descriptor, depth int) error {
	o := p.open(&p.members)
	if err := p.entries(n, d, depth, &o, nil); err != nil {
		return err
	}
	p.close(o)
	return nil
}

// entries renders the n entries of a map at depth through d: fields to o
// and, unless u is nil, unknown tags to u.
func (p *projector) entries(n uint64, d *Descriptor, depth int, o, u *object) error {
	for ; n > 0; n-- {
		if err := p.entry(o, u, d, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// entry renders one entry, at depth, of a map rendered through d: a field
// of d to o, else, unless u is nil, its tag to u.
func (p *projector) entry(o, u *object, d *Descriptor, depth int) error {
	tag, ok, err := p.tag(depth)
	if err != nil {
		return err
	}
	h, err := p.head(depth)
	if err != nil {
		return err
	}
	if ok {
		if f, known := d.Fields[tag]; known {
			p.nameKey(o, f.Name)
			return p.valueEnd(o, p.field(h, &f, depth))
		}
		if u != nil {
			p.tagKey(u, tag)
			return p.valueEnd(u, p.generic(h, depth))
		}
	}
	return p.r.Skip(h, depth)
}

// tag reads a map key at depth: an integer >= 0 or a decimal string is a
// tag; any other key is none.
func (p *projector) tag(depth int) (uint64, bool, error) {
	h, err := p.head(depth)
	if err != nil {
		return 0, false, err
	}
	switch h.Kind {
	case msgpackread.Uint:
		return h.N, true, nil
	case msgpackread.Str:
		n, ok := parseTag(p.r.Bytes(h))
		return n, ok, nil
	}
	return 0, false, p.r.Skip(h, depth)
}

// parseTag parses a decimal u64 as strconv.ParseUint(s, 10, 64) does.
func parseTag(s []byte) (uint64, bool) {
	var n uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, len(s) > 0
}

// field renders a value of field f: enum first, then ref, then by type.
func (p *projector) field(h msgpackread.Head, f *Field, depth int) error {
	if f.Enum != "" && h.Kind == msgpackread.Uint && p.enum(h.N, f.Enum) {
		return nil
	}
	if f.Type == "ref" && f.Ref != "" {
		return p.ref(h, f.Ref, depth)
	}
	return p.typed(h, f.Type, f.Items, depth)
}

// typed renders a value as the type t; items are an array's.
func (p *projector) typed(h msgpackread.Head, t string, items *registry.Items, depth int) error {
	if t == "array" {
		if h.Kind == msgpackread.Array {
			return p.array(h.N, items, depth)
		}
	} else if simple, ok := p.simple(h, t); !simple {
		return p.generic(h, depth)
	} else if ok {
		return nil
	}
	p.buf = append(p.buf, "null"...)
	return p.r.Skip(h, depth)
}

// simple renders a value as t if t is a simple type that accepts it;
// simple is false when t is not a simple type, ok when it rendered.
func (p *projector) simple(h msgpackread.Head, t string) (simple, ok bool) {
	switch t {
	case "u64", "uint64", "int64":
		if ok = h.Kind == msgpackread.Uint; ok {
			p.u64(h.N)
		}
	case "u32", "uint32", "u8", "uint8", "int32":
		var n int64
		if n, ok = h.Int64(); ok {
			p.buf = strconv.AppendInt(p.buf, n, 10)
		}
	case "string":
		if ok = h.Kind == msgpackread.Str; ok {
			p.str(p.r.Bytes(h))
		}
	case "bool":
		if ok = h.Kind == msgpackread.Bool; ok {
			p.buf = strconv.AppendBool(p.buf, h.N == 1)
		}
	case "bytes", "typed_blob":
		if ok = h.Kind == msgpackread.Bin; ok {
			p.bytes(p.r.Bytes(h))
		}
	case "unix_ms", "time_ms", "timestamp_ms":
		var ms int64
		if ms, ok = h.Int64(); ok {
			p.time(ms)
		}
	default:
		return false, false
	}
	return true, ok
}

// enum renders n as a label of the enum id, if it has one.
func (p *projector) enum(n uint64, id string) bool {
	if p.reg == nil {
		return false
	}
	labels, ok := p.reg.Enum(id)
	if !ok {
		return false
	}
	var d [20]byte
	digits := strconv.AppendUint(d[:0], n, 10)
	label, ok := labels[string(digits)]
	if !ok {
		return false
	}
	switch p.o.Enum {
	case "number":
		p.buf = append(p.buf, digits...)
	case "both":
		p.buf = append(p.buf, `{"label":`...)
		p.buf = appendName(p.buf, label)
		p.buf = append(p.buf, `,"value":`...)
		p.buf = append(p.buf, digits...)
		p.buf = append(p.buf, '}')
	default:
		p.buf = appendName(p.buf, label)
	}
	return true
}

// array renders the n items of an array: items of a simple type by the
// type, of a ref by the type referred to, else generically.
func (p *projector) array(n uint64, items *registry.Items, depth int) error {
	p.buf = append(p.buf, '[')
	for i := range n {
		if i > 0 {
			p.buf = append(p.buf, ',')
		}
		h, err := p.head(depth + 1)
		if err != nil {
			return err
		}
		switch {
		case items != nil && items.Ref != "":
			err = p.ref(h, items.Ref, depth+1)
		case items != nil && items.Type != "":
			err = p.typed(h, items.Type, nil, depth+1)
		default:
			err = p.generic(h, depth+1)
		}
		if err != nil {
			return err
		}
	}
	p.buf = append(p.buf, ']')
	return nil
}

// ref renders a map through the latest version of typeID, known fields
// only; anything else renders generically.
func (p *projector) ref(h msgpackread.Head, typeID string, depth int) error {
	if h.Kind == msgpackread.Map && p.reg != nil {
		if d, ok := p.latest(typeID); ok {
			return p.fields(h.N, &d, depth)
		}
	}
	return p.generic(h, depth)
}

// u64 renders an integer >= 0 as Options.U64 says.
func (p *projector) u64(n uint64) {
	if p.o.U64 == "number" {
		p.buf = strconv.AppendUint(p.buf, n, 10)
		return
	}
	p.buf = append(p.buf, '"')
	p.buf = strconv.AppendUint(p.buf, n, 10)
	p.buf = append(p.buf, '"')
}

// str renders a msgpack str, if it fits the limits.
func (p *projector) str(s []byte) {
	if p.roomString(s) {
		p.buf = appendValue(more(p.buf, len(s)+2), s)
	}
}

// bytes renders msgpack bin as Options.Bytes says, if it fits the limits.
func (p *projector) bytes(b []byte) {
	n := (len(b)+2)/3*4 + 2 // base64, quoted
	switch p.o.Bytes {
	case "hex":
		n = 2*len(b) + 2
	case "len_only":
		n = 20
	}
	if !p.room(n) {
		return
	}
	p.buf = more(p.buf, n)
	switch p.o.Bytes {
	case "hex":
		p.buf = append(p.buf, '"')
		p.buf = hex.AppendEncode(p.buf, b)
		p.buf = append(p.buf, '"')
	case "len_only":
		p.buf = strconv.AppendInt(p.buf, int64(len(b)), 10)
	default:
		p.buf = append(p.buf, '"')
		p.buf = base64.StdEncoding.AppendEncode(p.buf, b)
		p.buf = append(p.buf, '"')
	}
}

// time renders unix milliseconds as Options.Time says; a time out of the
// years 0 to 9999 is null.
func (p *projector) time(ms int64) {
	if p.o.Time == "unix_ms" {
		p.buf = strconv.AppendInt(p.buf, ms, 10)
		return
	}
	t := time.UnixMilli(ms).UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		p.buf = append(p.buf, "null"...)
		return
	}
	layout := "2006-01-02T15:04:05+00:00"
	if ms%1000 != 0 {
		layout = "2006-01-02T15:04:05.999+00:00"
	}
	p.buf = append(p.buf, '"')
	p.buf = t.AppendFormat(p.buf, layout)
	p.buf = append(p.buf, '"')
}

// generic renders a value without a type.
func (p *projector) generic(h msgpackread.Head, depth int) error {
	switch h.Kind {
	case msgpackread.Nil, msgpackread.Ext:
		p.buf = append(p.buf, "null"...)
	case msgpackread.Bool:
		p.buf = strconv.AppendBool(p.buf, h.N == 1)
	case msgpackread.Uint:
		p.u64(h.N)
	case msgpackread.Neg:
		p.buf = strconv.AppendInt(p.buf, int64(h.N), 10)
	case msgpackread.Float:
		p.buf = appendFloat(p.buf, h.Float64())
	case msgpackread.Str:
		p.str(p.r.Bytes(h))
	case msgpackread.Bin:
		p.bytes(p.r.Bytes(h))
	case msgpackread.Array:
		return p.array(h.N, nil, depth)
	case msgpackread.Map:
		return p.genericMap(h.N, depth)
	}
	return nil
}

// genericMap renders the n entries of a map by their keys: a string, the
// decimal of an integer >= 0, else "".
func (p *projector) genericMap(n uint64, depth int) error {
	o := p.open(&p.members)
	for ; n > 0; n-- {
		k, err := p.head(depth + 1)
		if err != nil {
			return err
		}
		switch k.Kind {
		case msgpackread.Str:
			if !p.roomString(p.r.Bytes(k)) {
				return p.err
			}
			p.rawKey(&o, p.r.Bytes(k))
		case msgpackread.Uint:
			p.tagKey(&o, k.N)
		default:
			if err := p.r.Skip(k, depth+1); err != nil {
				return err
			}
			p.rawKey(&o, nil)
		}
		h, err := p.head(depth + 1)
		if err == nil {
			err = p.valueEnd(&o, p.generic(h, depth+1))
		}
		if err != nil {
			return err
		}
	}
	p.close(o)
	return nil
}
