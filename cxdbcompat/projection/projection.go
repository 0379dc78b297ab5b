// Package projection renders a turn's msgpack payload as JSON through a
// type descriptor of the CXDB type registry, as spec section 5.3 describes:
// numeric tags become field names, each value rendered by its field's type,
// nested types by their latest version. It knows nothing of storage or
// HTTP, so the HTTP API and SQL analytics share it.
//
// Project reads the msgpack bytes once and writes JSON as it goes, without
// decoding to Go values: objects' keys come out sorted by name, as the
// reference emits them.
//
// The work of one projection is bounded (Limits): the msgpack values it
// reads and the JSON it writes. A payload over either bound is a
// *LimitError (errors.Is ErrLimit), found before the memory and time it
// would take, whatever the payload holds (ten million empty maps in 10 MB,
// say).
package projection

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/cardboxhq/cardbox/cxdbcompat/msgpackread"
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

// Result is a projected payload as JSON objects, keys sorted by name.
type Result struct {
	// Data is the object of the fields the descriptor names.
	Data json.RawMessage
	// Unknown is the object of the tags the descriptor does not name, by
	// decimal tag: nil unless Options.IncludeUnknown, "{}" when none.
	Unknown json.RawMessage
}

// Errors of Project; both are 422 for the HTTP API.
var (
	ErrDecode = errors.New("msgpack decode error")
	ErrNotMap = errors.New("payload is not a map")
)

// Limits bound the work of one projection; a zero field is its default.
type Limits struct {
	// MaxValues bounds the msgpack values read: each map key, map value,
	// array item and the top-level map count one (containers included,
	// empty or not).
	MaxValues int
	// MaxBytes bounds the JSON written, data and unknown together.
	MaxBytes int
}

// Defaults of Limits. A payload of at most DefaultMaxValues bytes never
// passes DefaultMaxValues (every value takes a byte). The values bound
// keeps the projection's bookkeeping (tens of bytes per value) to a few
// tens of MiB; the bytes bound is the HTTP API's page bound.
const (
	DefaultMaxValues = 1 << 18
	DefaultMaxBytes  = 48 << 20
)

func (l Limits) withDefaults() Limits {
	if l.MaxValues <= 0 {
		l.MaxValues = DefaultMaxValues
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// ErrLimit is what every *LimitError is (errors.Is).
var ErrLimit = errors.New("typed rendering over its bound")

// LimitError is a projection stopped by its Limits.
type LimitError struct {
	Bound string // "values" or "bytes"
	Limit int
}

func (e *LimitError) Error() string {
	if e.Bound == "values" {
		return fmt.Sprintf("%v: more than %d msgpack values (map keys, values, array items and containers)", ErrLimit, e.Limit)
	}
	return fmt.Sprintf("%v: more than %d bytes of JSON", ErrLimit, e.Limit)
}

// Is makes errors.Is(err, ErrLimit) hold.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Project renders payload through d, within the default Limits. Trailing
// bytes after the first msgpack value are ignored. A key that is the same
// tag as an earlier one replaces it; of two fields that share a name, the
// later in the payload wins.
func Project(payload []byte, d Descriptor, reg Registry, o Options) (Result, error) {
	r, err := Render(payload, d, reg, o, Limits{})
	if err != nil {
		return Result{}, err
	}
	defer r.Release()
	out := make([]byte, 0, r.Len())
	out = r.AppendData(out)
	n := len(out)
	res := Result{Data: out[:n:n]}
	if o.IncludeUnknown {
		res.Unknown = r.AppendUnknown(out)[n:]
	}
	return res, nil
}

// Rendering is a projected payload not yet written out: its size is known
// before a byte of it is copied, so a caller can decide where (or whether)
// it goes. Release it when done.
type Rendering struct {
	p               *projector
	data, unknown   int // their nodes; unknown -1 without IncludeUnknown
	dataLen, unkLen int
}

// Render projects payload through d as Project does, within lim; the
// error of a payload over lim is a *LimitError.
func Render(payload []byte, d Descriptor, reg Registry, o Options, lim Limits) (*Rendering, error) {
	p := pool.Get().(*projector)
	p.r = msgpackread.NewReader(payload, maxDepth)
	p.reg, p.o, p.lim = reg, o, lim.withDefaults()
	r, err := p.project(&d)
	if err != nil {
		p.release()
		return nil, err
	}
	return r, nil
}

// Len is the bytes AppendData and AppendUnknown write together.
func (r *Rendering) Len() int { return r.dataLen + r.unkLen }

// AppendData appends the object of the fields the descriptor names.
func (r *Rendering) AppendData(dst []byte) []byte { return r.p.emit(dst, r.data) }

// AppendUnknown appends the object of the tags the descriptor does not
// name, by decimal tag; nothing unless Options.IncludeUnknown.
func (r *Rendering) AppendUnknown(dst []byte) []byte {
	if r.unknown < 0 {
		return dst
	}
	return r.p.emit(dst, r.unknown)
}

// Release gives the rendering's memory back; r must not be used after.
func (r *Rendering) Release() {
	if p := r.p; p != nil {
		r.p = nil // before the projector goes back to the pool, r with it
		p.release()
	}
}

// maxDepth bounds nesting, so a hostile payload cannot exhaust the stack.
const maxDepth = 256

var pool = sync.Pool{New: func() any { return new(projector) }}

// maxPooled is the largest buffer a pooled projector keeps.
const maxPooled = 64 << 10

// projector is the state of one Project call; pooled, as its buffers are
// what would otherwise be allocated per call.
type projector struct {
	r   msgpackread.Reader
	reg Registry
	o   Options
	lim Limits

	rend   Rendering // what Render returns, to save an allocation
	values int       // values read
	extra  int       // bytes emit adds to p.buf's: braces and commas
	err    error     // the *LimitError that ends the call

	buf      []byte   // members' JSON, objects' members unordered
	keys     []byte   // members' raw keys
	members  []member // members of the objects being rendered, a stack
	unknown  []member // members of the top level's unknown object
	idx      []int32  // members' order, as order sorts them
	done     []member // members of the objects that have ended, in order
	nodes    []node   // objects that have ended
	kids     []int    // nodes nested in members that have ended
	kidStack []int    // nodes nested in members being rendered
	types    []cachedType
}

// cachedType is a Latest answer, kept for the call.
type cachedType struct {
	id string
	d  Descriptor
	ok bool
}

// maxCachedTypes bounds the types one call remembers.
const maxCachedTypes = 16

func (p *projector) release() {
	p.r, p.reg, p.err = msgpackread.Reader{}, nil, nil
	clear(p.types)
	p.types = p.types[:0]
	if cap(p.buf) > maxPooled || cap(p.keys) > maxPooled ||
		cap(p.members)+cap(p.done)+cap(p.nodes) > maxPooled/32 || cap(p.idx)+cap(p.kids)+cap(p.kidStack) > maxPooled/8 {
		*p = projector{}
	}
	pool.Put(p)
}

func (p *projector) project(d *Descriptor) (*Rendering, error) {
	p.buf, p.keys = p.buf[:0], p.keys[:0]
	p.members, p.unknown, p.done = p.members[:0], p.unknown[:0], p.done[:0]
	p.nodes, p.kids, p.kidStack = p.nodes[:0], p.kids[:0], p.kidStack[:0]
	p.values, p.extra, p.err = 0, 0, nil
	h, err := p.head(0)
	if err == nil && h.Kind != msgpackread.Map {
		if err = p.r.Skip(h, 0); err == nil {
			return nil, ErrNotMap
		}
	}
	if err == nil {
		data, unknown := p.open(&p.members), p.open(&p.unknown)
		u := &unknown
		if !p.o.IncludeUnknown {
			u = nil
		}
		if err = p.entries(h.N, d, 0, &data, u); err == nil && p.room(0) {
			return p.rendering(data, unknown), nil
		}
	}
	var le *LimitError
	if p.err != nil && errors.As(p.err, &le) {
		return nil, le
	}
	return nil, fmt.Errorf("%w: %w", ErrDecode, err)
}

// rendering ends the top level's objects; data and unknown are what
// fields rendered.
func (p *projector) rendering(data, unknown object) *Rendering {
	r := &p.rend
	*r = Rendering{p: p, data: p.end(data), unknown: -1}
	r.dataLen = p.size(r.data)
	if p.o.IncludeUnknown {
		r.unknown = p.end(unknown)
		r.unkLen = p.size(r.unknown)
	}
	return r
}

// head reads the head of the next value at depth, counted against the
// limits; once over them, every read fails.
func (p *projector) head(depth int) (msgpackread.Head, error) {
	if p.values++; p.values > p.lim.MaxValues && p.err == nil {
		p.err = &LimitError{Bound: "values", Limit: p.lim.MaxValues}
	}
	if p.err != nil || !p.room(0) {
		return msgpackread.Head{}, p.err
	}
	p.buf = more(p.buf, 64) // room for a small value, doubling (see push)
	return p.r.Head(depth)
}

// room reports whether n more bytes of JSON keep the output within the
// limit; when not, the call fails at its next read.
func (p *projector) room(n int) bool {
	if p.err == nil && len(p.buf)+p.extra+n > p.lim.MaxBytes {
		p.err = &LimitError{Bound: "bytes", Limit: p.lim.MaxBytes}
	}
	return p.err == nil
}

// roomString is room for s written as a JSON string, key or value.
func (p *projector) roomString(s []byte) bool {
	if len(p.buf)+p.extra+6*len(s)+2 <= p.lim.MaxBytes {
		return p.err == nil
	}
	n := len(s) + 2
	for _, c := range s {
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			n += 5 // \u00XX, or \ufffd for a byte of invalid UTF-8
		}
	}
	return p.room(n)
}

// latest is reg.Latest(id), remembered for the call.
func (p *projector) latest(id string) (Descriptor, bool) {
	for i := range p.types {
		if p.types[i].id == id {
			return p.types[i].d, p.types[i].ok
		}
	}
	d, ok := p.reg.Latest(id)
	if len(p.types) < maxCachedTypes {
		p.types = append(p.types, cachedType{id, d, ok})
	}
	return d, ok
}
