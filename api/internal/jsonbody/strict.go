package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cardboxhq/cardbox/internal/fault"
)

// Strict request bodies. encoding/json accepts what cardbox must refuse:
// it ignores unknown members, lets a repeated member replace the first,
// matches member names regardless of case, and replaces invalid UTF-8 and
// lone surrogates with U+FFFD. checkBody reads the raw body before it is
// decoded and refuses all of these, as well as strings and numbers that
// Postgres cannot store (\u0000, numbers beyond its numeric type), with a
// 400 that names the field. Syntax errors are left to encoding/json, whose
// errors jsonError turns into a 400 naming the field.

// bodyShape is what a request type allows at one place of its JSON. A nil
// shape allows any value (json.RawMessage, scalars), whose strings and
// numbers are still checked.
type bodyShape struct {
	// members are a struct's member names and their shapes; nil when the
	// shape is an array's.
	members map[string]*bodyShape
	// names are the member names in declaration order, for messages.
	names []string
	// alone is a member that allows no other beside it (tag strict:"alone").
	alone string
	// items is the shape of an array's elements.
	items *bodyShape
}

// shapes caches shapeOf by type.
var shapes sync.Map // reflect.Type -> *bodyShape

// shapeFor returns the shape of the value v points to.
func shapeFor(v any) *bodyShape {
	t := reflect.TypeOf(v)
	if s, ok := shapes.Load(t); ok {
		return s.(*bodyShape)
	}
	s, _ := shapes.LoadOrStore(t, shapeOf(t))
	return s.(*bodyShape)
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// shapeOf derives a shape from a Go type as encoding/json decodes it. A
// type that decodes itself (time.Time, an id taking "12" and 12) allows
// any value: its own decoding judges it.
func shapeOf(t reflect.Type) *bodyShape {
	if t != rawMessageType && reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return shapeOf(t.Elem())
	case reflect.Slice:
		if items := shapeOf(t.Elem()); items != nil && t != rawMessageType {
			return &bodyShape{items: items}
		}
	case reflect.Struct:
		s := &bodyShape{members: map[string]*bodyShape{}}
		s.addMembers(t)
		return s
	}
	return nil
}

// addMembers adds the JSON members of struct type t, with those of its
// embedded structs.
func (s *bodyShape) addMembers(t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			s.addMembers(f.Type)
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		s.members[name] = shapeOf(f.Type)
		s.names = append(s.names, name)
		if f.Tag.Get("strict") == "alone" {
			s.alone = name
		}
	}
}

// Limits of the numbers Postgres's numeric type (and so jsonb) stores.
const (
	maxNumericIntDigits  = 131072
	maxNumericFracDigits = 16383
)

// maxBodyDepth is encoding/json's limit of nesting.
const maxBodyDepth = 10000

// errSyntax stops a check at a syntax error, which encoding/json reports.
var errSyntax = errors.New("JSON syntax error")

// checkBody checks a request body against a shape; see the top of this
// file. It returns nil for a body that is fine or syntactically invalid.
func checkBody(body []byte, shape *bodyShape) *fault.Error {
	c := bodyChecker{b: body}
	err := c.value(shape)
	if err == nil {
		c.space()
		if c.i != len(c.b) {
			return nil // trailing data: a syntax error
		}
	}
	var e *fault.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// bodyChecker walks a JSON body once.
type bodyChecker struct {
	b    []byte
	i    int
	path []pathStep // where the walk is
}

// pathStep is one step of a field path: an object member or an array
// element.
type pathStep struct {
	name  string
	index int // -1 for a member
}

// field renders the path, e.g. "cards[0].metadata.type".
func (c *bodyChecker) field() string {
	var b strings.Builder
	for _, s := range c.path {
		if s.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.name)
	}
	return b.String()
}

// problem is a 400 about the field at the current path.
func (c *bodyChecker) problem(format string, args ...any) *fault.Error {
	field := c.field()
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	e := fault.New(fault.Invalid, "%s", msg)
	e.Details = map[string]any{"field": field}
	return e
}

func (c *bodyChecker) space() { c.i = skipSpace(c.b, c.i) }

// next consumes byte b after whitespace, if it is there.
func (c *bodyChecker) next(b byte) bool {
	var ok bool
	c.i, ok = skipByte(c.b, c.i, b)
	return ok
}

func (c *bodyChecker) value(shape *bodyShape) error {
	if len(c.path) >= maxBodyDepth {
		return errSyntax
	}
	c.space()
	if c.i == len(c.b) {
		return errSyntax
	}
	switch c.b[c.i] {
	case '{':
		return c.object(shape)
	case '[':
		return c.array(shape)
	case '"':
		_, reason, err := c.str()
		if err == nil && reason != "" {
			return c.problem("the string %s", reason)
		}
		return err
	case 't', 'f', 'n':
		for c.i < len(c.b) && 'a' <= c.b[c.i] && c.b[c.i] <= 'z' {
			c.i++
		}
		return nil // a wrong word is a syntax error
	}
	return c.number()
}

func (c *bodyChecker) object(shape *bodyShape) error {
	c.i++ // {
	if c.next('}') {
		return nil
	}
	var seen memberSet
	for {
		name, err := c.memberName()
		if err != nil {
			return err
		}
		c.path = append(c.path, pathStep{name: name, index: -1})
		if !seen.add(name) {
			return c.problem("the member %q appears more than once", name)
		}
		var child *bodyShape
		if shape != nil && shape.members != nil {
			known, ok := shape.members[name]
			if !ok {
				return c.problem("unknown field %q; the fields here are %s", name, strings.Join(shape.names, ", "))
			}
			child = known
		}
		if !c.next(':') {
			return errSyntax
		}
		if shape != nil && name == shape.alone && c.nullNext() {
			// Decoded, it would be absent: the body would read as one bare item.
			return c.problem("must be an array of items, not null")
		}
		if err := c.value(child); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
		if c.next('}') {
			break
		}
		if !c.next(',') {
			return errSyntax
		}
	}
	if shape != nil && shape.alone != "" && seen.has(shape.alone) && len(seen.names) > 1 {
		c.path = append(c.path, pathStep{name: shape.alone, index: -1})
		return c.problem("cannot be combined with other fields (%s): send {%q: [...]} or one bare item",
			strings.Join(seen.without(shape.alone), ", "), shape.alone)
	}
	return nil
}

// nullNext reports whether the next value is the literal null.
func (c *bodyChecker) nullNext() bool {
	c.space()
	return bytes.HasPrefix(c.b[c.i:], []byte("null"))
}

// memberName reads a member name and its colon.
func (c *bodyChecker) memberName() (string, error) {
	c.space()
	if c.i == len(c.b) || c.b[c.i] != '"' {
		return "", errSyntax
	}
	start := c.i
	raw, reason, err := c.str()
	if err != nil {
		return "", err
	}
	if reason != "" {
		return "", c.problem("the member name %s %s", quoteRaw(c.b[start:c.i]), reason)
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw), nil
	}
	var name string
	if err := json.Unmarshal(c.b[start:c.i], &name); err != nil {
		return "", errSyntax
	}
	return name, nil
}

func (c *bodyChecker) array(shape *bodyShape) error {
	c.i++ // [
	if c.next(']') {
		return nil
	}
	var items *bodyShape
	if shape != nil {
		items = shape.items
	}
	for i := 0; ; i++ {
		c.path = append(c.path, pathStep{index: i})
		if err := c.value(items); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
		if c.next(']') {
			return nil
		}
		if !c.next(',') {
			return errSyntax
		}
	}
}

// str reads a string at c.i and returns its raw content (escapes as
// written) and, when the string cannot be stored, the reason.
func (c *bodyChecker) str() (raw []byte, reason string, err error) {
	start := c.i + 1
	for i := start; i < len(c.b); {
		switch b := c.b[i]; {
		case b == '"':
			c.i = i + 1
			return c.b[start:i], reason, nil
		case b < 0x20:
			return nil, "", errSyntax
		case b == '\\':
			n, why := checkEscape(c.b[i:])
			if n == 0 {
				return nil, "", errSyntax
			}
			if reason == "" {
				reason = why
			}
			i += n
		case b < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(c.b[i:])
			if r == utf8.RuneError && n == 1 && reason == "" {
				reason = fmt.Sprintf("is not valid UTF-8 (byte 0x%02x)", b)
			}
			i += n
		}
	}
	return nil, "", errSyntax
}

// checkEscape reads the escape at the start of s and returns its length
// (0 when malformed) and, when it encodes something that cannot be
// stored, the reason.
func checkEscape(s []byte) (n int, reason string) {
	if len(s) < 2 {
		return 0, ""
	}
	switch s[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, ""
	case 'u':
	default:
		return 0, ""
	}
	r, ok := hex4(s[2:])
	switch {
	case !ok:
		return 0, ""
	case r == 0:
		return 6, `contains \u0000 (NUL), which cannot be stored`
	case utf16.IsSurrogate(r) && r < 0xdc00:
		// A high surrogate must be followed by a low one.
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if low, ok := hex4(s[8:]); ok && 0xdc00 <= low && low <= 0xdfff {
				return 12, ""
			}
		}
		return 6, fmt.Sprintf(`contains a lone UTF-16 surrogate \u%04x (a high surrogate needs a low one after it)`, r)
	case utf16.IsSurrogate(r):
		return 6, fmt.Sprintf(`contains a lone UTF-16 surrogate \u%04x (a low surrogate needs a high one before it)`, r)
	}
	return 6, ""
}

// hex4 decodes four hex digits.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, b := range s[:4] {
		var d byte
		switch {
		case '0' <= b && b <= '9':
			d = b - '0'
		case 'a' <= b && b <= 'f':
			d = b - 'a' + 10
		case 'A' <= b && b <= 'F':
			d = b - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// number reads a number and refuses one that Postgres's numeric type
// cannot hold: more than maxNumericIntDigits digits before the decimal
// point or maxNumericFracDigits after it, counted from the digits and the
// exponent as written (so a few numbers Postgres would take, such as
// 0e200000, are refused too).
func (c *bodyChecker) number() error {
	start := c.i
	digits := func() int {
		n := 0
		for c.i < len(c.b) && '0' <= c.b[c.i] && c.b[c.i] <= '9' {
			c.i++
			n++
		}
		return n
	}
	if c.i < len(c.b) && c.b[c.i] == '-' {
		c.i++
	}
	intDigits, fracDigits, exp := digits(), 0, 0
	if intDigits == 0 {
		return errSyntax
	}
	if c.i < len(c.b) && c.b[c.i] == '.' {
		c.i++
		if fracDigits = digits(); fracDigits == 0 {
			return errSyntax
		}
	}
	if c.i < len(c.b) && (c.b[c.i] == 'e' || c.b[c.i] == 'E') {
		c.i++
		var ok bool
		if exp, ok = c.exponent(); !ok {
			return errSyntax
		}
	}
	if intDigits+exp > maxNumericIntDigits || fracDigits-exp > maxNumericFracDigits {
		return c.problem("the number %s is beyond what can be stored (at most %d digits before the decimal point and %d after it)",
			truncate(string(c.b[start:c.i]), 40), maxNumericIntDigits, maxNumericFracDigits)
	}
	return nil
}

// exponent reads an exponent's sign and digits, saturating far beyond the
// limits.
func (c *bodyChecker) exponent() (int, bool) {
	sign := 1
	if c.i < len(c.b) && (c.b[c.i] == '+' || c.b[c.i] == '-') {
		if c.b[c.i] == '-' {
			sign = -1
		}
		c.i++
	}
	const saturated = 1 << 30
	n, digits := 0, 0
	for ; c.i < len(c.b) && '0' <= c.b[c.i] && c.b[c.i] <= '9'; c.i++ {
		n = min(n*10+int(c.b[c.i]-'0'), saturated)
		digits++
	}
	return sign * n, digits > 0
}

// memberSet holds the member names of one object, to find repeats.
type memberSet struct {
	names []string
	index map[string]struct{} // once there are many names
}

// add adds name and reports whether it is new.
func (m *memberSet) add(name string) bool {
	if m.has(name) {
		return false
	}
	m.names = append(m.names, name)
	if m.index != nil || len(m.names) > 16 {
		if m.index == nil {
			m.index = make(map[string]struct{}, 2*len(m.names))
			for _, n := range m.names {
				m.index[n] = struct{}{}
			}
		}
		m.index[name] = struct{}{}
	}
	return true
}

func (m *memberSet) has(name string) bool {
	if m.index != nil {
		_, ok := m.index[name]
		return ok
	}
	for _, n := range m.names {
		if n == name {
			return true
		}
	}
	return false
}

// without returns the names but one, quoted.
func (m *memberSet) without(name string) []string {
	var out []string
	for _, n := range m.names {
		if n != name {
			out = append(out, strconv.Quote(n))
		}
	}
	return out
}

// quoteRaw shows a string as written in the body, with bytes that are not
// UTF-8 as \xNN.
func quoteRaw(raw []byte) string {
	var b strings.Builder
	for len(raw) > 0 {
		r, n := utf8.DecodeRune(raw)
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, `\x%02x`, raw[0])
		} else {
			b.Write(raw[:n])
		}
		raw = raw[n:]
	}
	return truncate(b.String(), 80)
}

// truncate shortens s for a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
