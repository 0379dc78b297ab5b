// Package ctxmeta extracts CXDB context metadata (client tag, title, labels
// and provenance) from the msgpack payload of a context's first turn, as
// described in §6 and §9 of the cardbox CXDB compatibility reference.
//
// # Keys
//
// Integer keys (unsigned, or signed and non-negative) and string keys that
// parse as a decimal uint64 ("30", as the official Go and Rust clients write
// them) name the same tag at every level. Other keys are ignored. When a tag
// occurs twice in one map the later entry wins, as in the typed projection.
//
// # Robustness
//
// Payloads are untrusted. Extract never panics, checks every declared
// length against the bytes that remain before reading or allocating, refuses
// nesting deeper than MaxDepth and ignores bytes after the first msgpack
// value. A payload that is not a single well-formed msgpack value up to its
// end (truncated, over-deep, unknown type code) yields no metadata.
//
// # Text cleaning
//
// Every string Extract returns (client tag, title, labels, provenance
// strings, env keys and values) is passed through CleanText, so that it can
// be stored in a Postgres text or JSONB column: each maximal run of invalid
// UTF-8 bytes becomes one U+FFFD (strings.ToValidUTF8 semantics) and each NUL
// character (U+0000) becomes U+FFFD too. Valid text without NUL is returned
// unchanged.
package ctxmeta

import (
	"strings"

	"github.com/cardboxhq/cardbox/cxdbcompat/msgpackread"
)

// MaxDepth is the deepest nesting of msgpack maps and arrays Extract
// accepts: the top-level map is depth 1, and a value inside more than
// MaxDepth maps and arrays makes the payload malformed.
const MaxDepth = 64

// Metadata is the context metadata found under tag 30 (context_metadata) of
// a first turn. Nil fields were absent or had the wrong type.
type Metadata struct {
	// ClientTag is tag 1, client_tag.
	ClientTag *string `json:"client_tag,omitempty"`
	// Title is tag 2, title.
	Title *string `json:"title,omitempty"`
	// Labels is tag 3: the string items of the labels array, nil when none.
	Labels []string `json:"labels,omitempty"`
	// Provenance is tag 10, nil when absent or not a map.
	Provenance *Provenance `json:"provenance,omitempty"`
}

// found reports whether at least one of the four fields is present.
func (m Metadata) found() bool {
	return m.ClientTag != nil || m.Title != nil || m.Labels != nil || m.Provenance != nil
}

// Extract reads the context metadata from payload, the uncompressed msgpack
// bytes of a turn. The top-level value must be a map holding tag 30 whose
// value is a map. ok is false when the payload is malformed or when none of
// client_tag, title, labels and provenance was found. Tag 4 (custom) is
// ignored.
func Extract(payload []byte) (m Metadata, ok bool) {
	r := reader{msgpackread.NewReader(payload, MaxDepth)}
	h, err := r.Head(0)
	if err != nil {
		return Metadata{}, false
	}
	isMap, err := r.eachEntry(h, 0, func(tag uint64, v head, depth int) error {
		if tag != 30 {
			return r.Skip(v, depth)
		}
		var err error
		m, err = r.metadata(v, depth)
		return err
	})
	if err != nil || !isMap || !m.found() {
		return Metadata{}, false
	}
	return m, true
}

// metadata reads the value of tag 30; a value that is not a map gives the
// zero Metadata.
func (r *reader) metadata(h head, depth int) (Metadata, error) {
	var m Metadata
	_, err := r.eachEntry(h, depth, func(tag uint64, v head, d int) error {
		var err error
		switch tag {
		case 1:
			m.ClientTag, err = r.str(v, d)
		case 2:
			m.Title, err = r.str(v, d)
		case 3:
			m.Labels, err = r.labels(v, d)
		case 10:
			m.Provenance, err = r.provenance(v, d)
		default:
			err = r.Skip(v, d)
		}
		return err
	})
	return m, err
}

// labels reads an array value, keeping its string items; it returns nil
// when the value is not an array or has no string item.
func (r *reader) labels(h head, depth int) ([]string, error) {
	var out []string
	_, err := r.eachItem(h, depth, func(v head, d int) error {
		s, err := r.str(v, d)
		if s != nil {
			out = append(out, *s)
		}
		return err
	})
	return out, err
}

// CleanText makes s storable in Postgres text and JSONB: each maximal run
// of invalid UTF-8 bytes is replaced by one U+FFFD and each NUL character by
// U+FFFD. Valid UTF-8 without NUL is returned unchanged.
func CleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return s
}
