package typedjson

import (
	"errors"
	"strconv"
	"strings"
)

// ErrNotObject is wrapped by the error Encode returns when data is not a
// single JSON object (including data that is not valid JSON).
var ErrNotObject = errors.New("typedjson: data is not a JSON object")

// FieldError reports a value that cannot be encoded as its field's type, or
// a field name the type does not have. Path is the dotted path of the field
// from the top-level object, with array indexes in brackets
// ("turn.tool_calls[2].status").
type FieldError struct {
	Path string
	Msg  string
}

// Error returns "<path>: <msg>", or just the message when Path is empty.
func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// path is a cheap linked path to the value being encoded; it is rendered
// only when an error is reported.
type path struct {
	parent *path
	name   string
	index  int // -1 for a named step
}

func (p *path) key(name string) *path { return &path{parent: p, name: name, index: -1} }

func (p *path) at(i int) *path { return &path{parent: p, index: i} }

func (p *path) String() string {
	if p == nil {
		return ""
	}
	var steps []*path
	for q := p; q != nil; q = q.parent {
		steps = append(steps, q)
	}
	var b strings.Builder
	for i := len(steps) - 1; i >= 0; i-- {
		q := steps[i]
		switch {
		case q.index >= 0:
			b.WriteString("[" + strconv.Itoa(q.index) + "]")
		case b.Len() > 0:
			b.WriteString("." + q.name)
		default:
			b.WriteString(q.name)
		}
	}
	return b.String()
}

func fieldErr(at *path, msg string) error {
	return &FieldError{Path: at.String(), Msg: msg}
}

// jsonKind names the JSON kind of a decoded value for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return "number"
	}
}

func typeErr(at *path, want string, got any) error {
	return fieldErr(at, "expected "+want+", got "+jsonKind(got))
}

func depthErr(at *path) error {
	return fieldErr(at, "nesting deeper than "+strconv.Itoa(MaxDepth)+" levels")
}
