package typedjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/vmihailenco/msgpack/v5"
)

// MaxDepth is the deepest nesting of JSON objects and arrays Encode accepts,
// counting the top-level object as 1.
const MaxDepth = 64

// Types resolves the registry lookups the encoder needs: the latest version
// of a referenced type, and an enum's labels keyed by the decimal string of
// each value. A registry snapshot satisfies it.
type Types interface {
	Latest(typeID string) (registry.Descriptor, bool)
	Enum(id string) (map[string]string, bool)
}

// Encode encodes data, a JSON object keyed by field names of d, as the
// msgpack map the official Go client would write: digit-string tag keys
// sorted numerically, values encoded by field type (see the package
// documentation). types resolves nested ref types and enums; it may be nil,
// in which case refs and enums are treated as unknown.
//
// An error wraps ErrNotObject when data is not a single JSON object; any
// other error is a *FieldError.
func Encode(data json.RawMessage, d registry.Descriptor, types Types) ([]byte, error) {
	obj, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	s := newState(types)
	if err := s.object(obj, namesOf(d), nil, 1); err != nil {
		return nil, err
	}
	if s.err != nil {
		return nil, s.err
	}
	return s.buf.Bytes(), nil
}

// decodeObject parses data as exactly one JSON object, keeping numbers as
// json.Number so integers keep their full precision.
func decodeObject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: invalid JSON: %v", ErrNotObject, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: unexpected data after the JSON value", ErrNotObject)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: got %s", ErrNotObject, jsonKind(v))
	}
	return obj, nil
}

// state is one encoding run: the output and per-run lookup caches.
type state struct {
	buf   bytes.Buffer
	enc   *msgpack.Encoder
	err   error // first write error; a bytes.Buffer never fails
	types Types
	refs  map[string]*fieldNames // latest version by type id; nil = unknown
	enums map[string]*enumIndex  // by enum id; nil = unknown
}

func newState(types Types) *state {
	s := &state{types: types, refs: map[string]*fieldNames{}, enums: map[string]*enumIndex{}}
	s.enc = msgpack.NewEncoder(&s.buf)
	return s
}

// put records the first write error.
func (s *state) put(err error) {
	if s.err == nil {
		s.err = err
	}
}

// fieldNames indexes a descriptor's fields by name.
type fieldNames struct {
	typeID string
	byName map[string]uint64
	fields map[uint64]registry.Field
}

// namesOf indexes d by field name. When two tags share a name, the lowest
// tag wins, so the choice is deterministic.
func namesOf(d registry.Descriptor) *fieldNames {
	n := &fieldNames{typeID: d.TypeID, byName: make(map[string]uint64, len(d.Fields)), fields: d.Fields}
	for tag, f := range d.Fields {
		if old, ok := n.byName[f.Name]; !ok || tag < old {
			n.byName[f.Name] = tag
		}
	}
	return n
}

// latest returns the field index of the latest version of typeID, or nil
// when the type is unknown.
func (s *state) latest(typeID string) *fieldNames {
	if n, ok := s.refs[typeID]; ok {
		return n
	}
	var n *fieldNames
	if s.types != nil {
		if d, ok := s.types.Latest(typeID); ok {
			n = namesOf(d)
		}
	}
	s.refs[typeID] = n
	return n
}

// entry is one field of an object being encoded.
type entry struct {
	tag   uint64
	name  string
	value any
}

// entries maps the keys of obj to tags, sorted by tag. An unknown name is
// an error; the alphabetically first one is reported.
func entries(obj map[string]any, n *fieldNames, at *path) ([]entry, error) {
	keys := sortedKeys(obj)
	out := make([]entry, 0, len(keys))
	for _, k := range keys {
		tag, ok := n.byName[k]
		if !ok {
			return nil, fieldErr(at.key(k), fmt.Sprintf("unknown field for type %q", n.typeID))
		}
		out = append(out, entry{tag: tag, name: k, value: obj[k]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].tag < out[j].tag })
	return out, nil
}

func sortedKeys(obj map[string]any) []string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// object writes obj as a tag-keyed map of type n. level is the nesting
// level of obj itself.
func (s *state) object(obj map[string]any, n *fieldNames, at *path, level int) error {
	if level > MaxDepth {
		return depthErr(at)
	}
	es, err := entries(obj, n, at)
	if err != nil {
		return err
	}
	s.put(s.enc.EncodeMapLen(len(es)))
	for _, e := range es {
		s.put(s.enc.EncodeString(strconv.FormatUint(e.tag, 10)))
		if err := s.field(e.value, n.fields[e.tag], at.key(e.name), level+1); err != nil {
			return err
		}
	}
	return nil
}
