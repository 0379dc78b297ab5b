// Package jsonbody decodes the JSON request bodies of the HTTP surfaces
// strictly: what encoding/json would accept but cardbox refuses (unknown
// or repeated members, invalid UTF-8, lone surrogates, NUL, numbers
// Postgres cannot store) and what it cannot decode are a 400 that names
// the field.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/internal/fault"
)

// Decode reads the request body into v. A body over the limit is 413
// (the BodyLimit middleware's error passes through); an empty or malformed
// body is 400, naming the field where decoding failed, and so is a body
// that checkBody refuses: unknown or repeated members, strings and numbers
// that cannot be stored. A v that is a FastDecoder tries its own decoder
// first.
func Decode(c echo.Context, v any) error {
	body, err := Read(c.Request())
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return he
		}
		var e *fault.Error
		if errors.As(err, &e) {
			return e
		}
		return fault.New(fault.Invalid, "read request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return fault.New(fault.Invalid, "request body is empty; expected a JSON object")
	}
	if f, ok := v.(FastDecoder); ok && f.DecodeFast(body) {
		return nil
	}
	if e := checkBody(body, shapeFor(v)); e != nil {
		return e
	}
	if err := json.Unmarshal(body, v); err != nil {
		return jsonError(body, err)
	}
	return nil
}

// DecodeStrict decodes a JSON body into v as DecodeStrictBody does; an
// empty body is allowed when emptyOK.
func DecodeStrict(c echo.Context, v any, emptyOK bool) error {
	body, err := Read(c.Request())
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return he
		}
		return fault.New(fault.Invalid, "read request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 && emptyOK {
		return nil
	}
	if e := DecodeStrictBody(body, v); e != nil {
		return e
	}
	return nil
}

// DecodeStrictBody decodes body into v; what encoding/json would accept
// but cardbox refuses (unknown or repeated members, invalid UTF-8, lone
// surrogates, NUL: see checkBody) and a body it cannot decode are a 400
// that names the field.
func DecodeStrictBody(body []byte, v any) *fault.Error {
	if e := checkBody(body, shapeFor(v)); e != nil {
		return e
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return jsonError(body, err)
	}
	return nil
}

// Check checks body against the request type v points to (nil: any JSON
// value) as Decode does before decoding it; it returns nil for a body
// that is fine or syntactically invalid.
func Check(body []byte, v any) *fault.Error {
	if v == nil {
		return checkBody(body, nil)
	}
	return checkBody(body, shapeFor(v))
}

// maxPresizedBody caps the buffer Read allocates on the word of
// Content-Length alone.
const maxPresizedBody = 64 << 10

// Read reads a request body into a buffer sized by its Content-Length,
// rather than growing one as io.ReadAll does.
func Read(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 {
		buf.Grow(int(min(n, maxPresizedBody)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}

// FastDecoder is a request body type with a decoder for its common shape,
// tried before encoding/json.
type FastDecoder interface {
	// DecodeFast decodes body if it has the common shape, which must give
	// the result encoding/json would, and reports whether it did.
	DecodeFast(body []byte) bool
}

// ScanIDList decodes body when it is exactly {"<key>": [<strings>]}, the
// batch read request, with JSON whitespace between tokens and ids of
// printable ASCII without escapes; it returns what encoding/json would.
// It reports false for any other body, which the caller then hands to
// encoding/json: other members, escapes, other bytes, null, bad syntax.
// Batch reads decode 100 ids per request, and this costs a fraction of
// encoding/json and one allocation for all the ids.
func ScanIDList(body []byte, key string) ([]string, bool) {
	p := idScanner{s: string(body)} // the ids are substrings of this copy
	if !p.next('{') {
		return nil, false
	}
	if k, ok := p.str(); !ok || k != key || !p.next(':') || !p.next('[') {
		return nil, false
	}
	// Each id has two quotes, and so does the key.
	ids := make([]string, 0, max(0, strings.Count(p.s, `"`)/2-1))
	for first := true; !p.next(']'); first = false {
		if !first && !p.next(',') {
			return nil, false
		}
		id, ok := p.str()
		if !ok {
			return nil, false
		}
		ids = append(ids, id)
	}
	if !p.next('}') {
		return nil, false
	}
	p.space()
	return ids, p.i == len(p.s)
}

// idScanner reads tokens of a JSON text for ScanIDList.
type idScanner struct {
	s string
	i int
}

// space skips JSON whitespace.
func (p *idScanner) space() { p.i = skipSpace(p.s, p.i) }

// next consumes the byte c after whitespace, if it is there.
func (p *idScanner) next(c byte) bool {
	var ok bool
	p.i, ok = skipByte(p.s, p.i, c)
	return ok
}

// str consumes a string of printable ASCII without escapes, after
// whitespace, and returns its content.
func (p *idScanner) str() (string, bool) {
	if !p.next('"') {
		return "", false
	}
	for j := p.i; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == '"':
			s := p.s[p.i:j]
			p.i = j + 1
			return s, true
		case c < 0x20 || c == '\\' || c > 0x7e:
			return "", false
		}
	}
	return "", false
}

// jsonError turns a decoding error into a 400 that names the field.
func jsonError(body []byte, err error) *fault.Error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		field := jsonPathAt(body, se.Offset)
		e := fault.New(fault.Invalid, "malformed JSON at %s (offset %d): %v", fieldName(field), se.Offset, se)
		e.Details = map[string]any{"field": field, "offset": se.Offset}
		return e
	case errors.As(err, &te):
		field := jsonPathAt(body, te.Offset)
		if te.Offset == 0 && te.Field != "" {
			field = te.Field // a type's own UnmarshalJSON refused it: encoding/json names the field but knows no offset
		}
		e := fault.New(fault.Invalid, "field %s: expected %s, got JSON %s", fieldName(field), jsonKind(te), te.Value)
		e.Details = map[string]any{"field": field, "offset": te.Offset}
		return e
	}
	return fault.New(fault.Invalid, "malformed JSON: %v", err)
}

func fieldName(path string) string {
	if path == "" {
		return "the top level"
	}
	return strconv.Quote(path)
}

// jsonKind names the JSON type a Go type expects.
func jsonKind(te *json.UnmarshalTypeError) string {
	if te.Type == nil {
		return "another value"
	}
	if te.Type == reflect.TypeFor[ID]() {
		return "a decimal id (a string or a number)"
	}
	switch k := te.Type.Kind().String(); {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "an integer"
	case strings.HasPrefix(k, "float"):
		return "a number"
	case k == "string":
		return "a string"
	case k == "bool":
		return "a boolean"
	case k == "slice", k == "array":
		return "an array"
	default:
		return "an object"
	}
}

// jsonFrame is one open object or array while walking a document.
type jsonFrame struct {
	object  bool
	key     string // object: the current member
	wantKey bool   // object: the next string token is a key
	index   int    // array: the current element, -1 before the first
}

// jsonPathAt returns the path (e.g. "cards[1].metadata") of the value
// being read at offset in body: the place a decoding error points to.
func jsonPathAt(body []byte, offset int64) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []jsonFrame
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		stack = stepJSON(stack, tok)
		if dec.InputOffset() >= offset {
			break
		}
	}
	return renderJSONPath(stack)
}

// stepJSON applies one token to the stack of open containers.
func stepJSON(stack []jsonFrame, tok json.Token) []jsonFrame {
	top := len(stack) - 1
	if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
		stack = stack[:top]
		if top > 0 && stack[top-1].object {
			stack[top-1].wantKey = true
		}
		return stack
	}
	if top >= 0 && stack[top].object && stack[top].wantKey {
		stack[top].key, _ = tok.(string)
		stack[top].wantKey = false
		return stack
	}
	if top >= 0 && !stack[top].object {
		stack[top].index++
	}
	switch tok {
	case json.Delim('{'):
		return append(stack, jsonFrame{object: true, wantKey: true})
	case json.Delim('['):
		return append(stack, jsonFrame{index: -1})
	}
	if top >= 0 && stack[top].object {
		stack[top].wantKey = true
	}
	return stack
}

func renderJSONPath(stack []jsonFrame) string {
	var b strings.Builder
	for _, f := range stack {
		switch {
		case f.object && f.key != "":
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		case !f.object && f.index >= 0:
			fmt.Fprintf(&b, "[%d]", f.index)
		}
	}
	return b.String()
}

// skipSpace returns the index of the first byte of s at or after i that
// is not JSON whitespace.
func skipSpace[T string | []byte](s T, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipByte skips whitespace and then the byte c, reporting whether c was
// there; it returns where the scan stands.
func skipByte[T string | []byte](s T, i int, c byte) (int, bool) {
	i = skipSpace(s, i)
	if i < len(s) && s[i] == c {
		return i + 1, true
	}
	return i, false
}
