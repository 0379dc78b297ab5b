// Package projection renders a turn's msgpack payload as JSON through a
// type descriptor of the CXDB type registry, as spec section 5.3 describes:
// numeric tags become field names, each value rendered by its field's type,
// nested types by their latest version. It knows nothing of storage or
// HTTP, so the HTTP API and SQL analytics share it.
//
// Project reads the msgpack bytes once and writes JSON as it goes, without
// decoding to Go values: objects' keys come out sorted by name, as the
// reference emits them.
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

// Project renders payload through d. Trailing bytes after the first
// msgpack value are ignored. A key that is the same tag as an earlier one
// replaces it; of two fields that share a name, the later in the payload
// wins.
func Project(payload []byte, d Descriptor, reg Registry, o Options) (Result, error) {
	p := pool.Get().(*projector)
	defer p.release()
	p.r = msgpackread.NewReader(payload, maxDepth)
	p.reg, p.o = reg, o
	return p.project(&d)
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

	buf      []byte   // members' JSON, objects' members unordered
	out      []byte   // where result writes the output
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
	p.r, p.reg = msgpackread.Reader{}, nil
	clear(p.types)
	p.types = p.types[:0]
	if cap(p.buf) > maxPooled || cap(p.out) > maxPooled || cap(p.keys) > maxPooled ||
		cap(p.members)+cap(p.done)+cap(p.nodes) > maxPooled/32 || cap(p.idx)+cap(p.kids)+cap(p.kidStack) > maxPooled/8 {
		*p = projector{}
	}
	pool.Put(p)
}

func (p *projector) project(d *Descriptor) (Result, error) {
	p.buf, p.keys = p.buf[:0], p.keys[:0]
	p.members, p.unknown, p.done = p.members[:0], p.unknown[:0], p.done[:0]
	p.nodes, p.kids, p.kidStack = p.nodes[:0], p.kids[:0], p.kidStack[:0]
	h, err := p.r.Head(0)
	if err == nil && h.Kind != msgpackread.Map {
		if err = p.r.Skip(h, 0); err == nil {
			return Result{}, ErrNotMap
		}
	}
	if err == nil {
		data, unknown := p.open(&p.members), p.open(&p.unknown)
		u := &unknown
		if !p.o.IncludeUnknown {
			u = nil
		}
		if err = p.entries(h.N, d, 0, &data, u); err == nil {
			return p.result(data, unknown), nil
		}
	}
	return Result{}, fmt.Errorf("%w: %w", ErrDecode, err)
}

// result writes the top level's objects into one new slice; data and
// unknown are what fields rendered.
func (p *projector) result(data, unknown object) Result {
	p.out = p.emit(p.out[:0], p.end(data))
	n := len(p.out)
	if p.o.IncludeUnknown {
		p.out = p.emit(p.out, p.end(unknown))
	}
	out := append([]byte(nil), p.out...)
	r := Result{Data: out[:n:n]}
	if p.o.IncludeUnknown {
		r.Unknown = out[n:]
	}
	return r
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
