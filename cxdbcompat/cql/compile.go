package cql

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// fieldNames lists the fields in the order the UnknownField message uses.
var fieldNames = []string{"id", "tag", "title", "label", "user", "service", "host",
	"trace_id", "parent", "root", "created", "depth", "is_live"}

// textFields are the free-text fields sharing one operator set.
var textFields = map[string]func(*Record) string{
	"tag":     func(r *Record) string { return r.Tag },
	"title":   func(r *Record) string { return r.Title },
	"user":    func(r *Record) string { return r.User },
	"service": func(r *Record) string { return r.Service },
	"host":    func(r *Record) string { return r.Host },
}

func knownField(name string) bool { return slices.Contains(fieldNames, name) }

func unknownFieldErr(t token) *Error {
	pos := t.pos
	return &Error{
		Message:  "Unknown field '" + t.text + "'. Valid fields: " + strings.Join(fieldNames, ", "),
		Type:     TypeUnknownField,
		Position: &pos,
		Field:    t.text,
	}
}

// compileTree validates every comparison in source order and attaches its
// predicate. The reference makes these checks while executing, left operand
// first, so the first failure here is the one it would report.
func compileTree(n node) *Error {
	switch n := n.(type) {
	case andNode:
		return compileAll(n)
	case orNode:
		return compileAll(n)
	case notNode:
		return compileTree(n.inner)
	case *comparison:
		test, err := compile(n)
		n.test = test
		return err
	}
	return nil
}

func compileAll(ns []node) *Error {
	for _, n := range ns {
		if err := compileTree(n); err != nil {
			return err
		}
	}
	return nil
}

func compile(c *comparison) (predicate, *Error) {
	switch c.field {
	case "id":
		return compileRef(c, func(r *Record) (uint64, bool) { return r.ID, true })
	case "parent":
		return compileRef(c, func(r *Record) (uint64, bool) { return r.Parent, r.HasParent })
	case "root":
		return compileRef(c, func(r *Record) (uint64, bool) { return r.Root, r.HasRoot })
	case "label":
		return compileLabel(c)
	case "trace_id":
		return compileTraceID(c)
	case "created":
		return compileCreated(c)
	case "depth":
		return compileDepth(c)
	case "is_live":
		return compileLive(c)
	}
	// host is the one text field whose ~= and ^~= stay case-sensitive.
	return compileText(c, textFields[c.field], c.field != "host")
}

func compileText(c *comparison, get func(*Record) string, fold bool) (predicate, *Error) {
	switch c.op {
	case opIn:
		wants := listStrings(c.val)
		return func(r *Record, _ time.Time) bool { return slices.Contains(wants, get(r)) }, nil
	case opEq, opNeq, opStarts, opEqCi, opStartsCi:
		want, ok := c.val.asString()
		if !ok {
			return nil, valueErr("Expected string value")
		}
		return textTest(get, c.op, want, fold), nil
	}
	return nil, operatorErr(c.op, "string fields")
}

func textTest(get func(*Record) string, op operator, want string, fold bool) predicate {
	lower := strings.ToLower(want)
	switch {
	case op == opEq || (op == opEqCi && !fold):
		return func(r *Record, _ time.Time) bool { return get(r) == want }
	case op == opNeq:
		return func(r *Record, _ time.Time) bool { return get(r) != want }
	case op == opStarts || (op == opStartsCi && !fold):
		return func(r *Record, _ time.Time) bool { return strings.HasPrefix(get(r), want) }
	case op == opEqCi:
		return func(r *Record, _ time.Time) bool { return strings.ToLower(get(r)) == lower }
	}
	return func(r *Record, _ time.Time) bool { return strings.HasPrefix(strings.ToLower(get(r)), lower) }
}

func compileLabel(c *comparison) (predicate, *Error) {
	switch c.op {
	case opIn:
		wants := listStrings(c.val)
		return func(r *Record, _ time.Time) bool { return hasLabel(r, wants) }, nil
	case opEq, opNeq:
		want, ok := c.val.asString()
		if !ok {
			return nil, valueErr("Expected string value")
		}
		neg := c.op == opNeq
		return func(r *Record, _ time.Time) bool { return hasLabel(r, []string{want}) != neg }, nil
	}
	return nil, operatorErr(c.op, "label field")
}

func hasLabel(r *Record, wants []string) bool {
	return slices.ContainsFunc(r.Labels, func(l string) bool { return slices.Contains(wants, l) })
}

func compileTraceID(c *comparison) (predicate, *Error) {
	if c.op != opEq && c.op != opNeq {
		return nil, operatorErr(c.op, "trace_id field")
	}
	want, ok := c.val.asString()
	if !ok {
		return nil, valueErr("Expected string value")
	}
	return textTest(func(r *Record) string { return r.TraceID }, c.op, want, false), nil
}

// compileRef handles id, parent and root: exact matches on an optional id.
func compileRef(c *comparison, get func(*Record) (uint64, bool)) (predicate, *Error) {
	is := func(r *Record, wants []uint64) bool {
		v, ok := get(r)
		return ok && slices.Contains(wants, v)
	}
	switch c.op {
	case opIn:
		wants := listUints(c.val)
		return func(r *Record, _ time.Time) bool { return is(r, wants) }, nil
	case opEq, opNeq:
		want, ok := c.val.asUint()
		if !ok {
			return nil, valueErr("Expected numeric value for %s", c.field)
		}
		neg := c.op == opNeq
		return func(r *Record, _ time.Time) bool { return is(r, []uint64{want}) != neg }, nil
	}
	return nil, operatorErr(c.op, c.field+" field")
}

// compileDepth checks the value before the operator, as the reference does.
func compileDepth(c *comparison) (predicate, *Error) {
	want, ok := c.val.asUint()
	if !ok {
		return nil, valueErr("Expected numeric value for depth")
	}
	if !isOrdering(c.op) {
		return nil, operatorErr(c.op, "depth field")
	}
	return func(r *Record, _ time.Time) bool { return compareOrdered(uint64(r.Depth), want, c.op) }, nil
}

// compileCreated checks the value before the operator, as the reference does.
func compileCreated(c *comparison) (predicate, *Error) {
	at, err := dateValue(c.val)
	if err != nil {
		return nil, err
	}
	if !isOrdering(c.op) {
		return nil, operatorErr(c.op, "created field")
	}
	return func(r *Record, now time.Time) bool { return compareOrdered(r.CreatedMs, at(now), c.op) }, nil
}

// compileLive accepts only string values: "true" means live, anything else
// means not live. Relative-date strings are rejected like the reference.
func compileLive(c *comparison) (predicate, *Error) {
	if c.val.kind != valString {
		return nil, valueErr("Expected boolean value for is_live")
	}
	if c.op != opEq {
		return nil, operatorErr(c.op, "is_live field")
	}
	want := c.val.str == "true"
	return func(r *Record, _ time.Time) bool { return r.IsLive == want }, nil
}

func isOrdering(op operator) bool {
	return op == opEq || op == opNeq || op == opGt || op == opGte || op == opLt || op == opLte
}

func compareOrdered[T int64 | uint64](a, b T, op operator) bool {
	switch op {
	case opEq:
		return a == b
	case opNeq:
		return a != b
	case opGt:
		return a > b
	case opGte:
		return a >= b
	case opLt:
		return a < b
	}
	return a <= b
}

// listStrings keeps the text items of an IN list; the reference silently
// skips items of the wrong kind rather than failing.
func listStrings(v value) []string {
	var out []string
	for _, item := range v.list {
		if s, ok := item.asString(); ok {
			out = append(out, s)
		}
	}
	return out
}

// listUints keeps the numeric items of an IN list, skipping others.
func listUints(v value) []uint64 {
	var out []uint64
	for _, item := range v.list {
		if n, ok := item.asUint(); ok {
			out = append(out, n)
		}
	}
	return out
}

// dateValue resolves a created value to unix ms, deferring relative dates
// until now is known. Like the reference's u64 timestamps, results never go
// below zero.
func dateValue(v value) (func(now time.Time) int64, *Error) {
	switch v.kind {
	case valDate:
		return relativeMs(v.str)
	case valString: // relative-looking strings were made valDate by the parser
		ms, err := absoluteMs(v.str)
		return func(time.Time) int64 { return ms }, err
	case valNumber:
		ms := clampMs(v.num)
		return func(time.Time) int64 { return ms }, nil
	}
	return nil, valueErr("Expected date value")
}

// unitMs maps relative-date units; m is minutes, not months.
var unitMs = map[string]int64{"h": 3_600_000, "d": 86_400_000, "m": 60_000}

func relativeMs(s string) (func(now time.Time) int64, *Error) {
	m := relativeDate.FindStringSubmatch(s)
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		return nil, valueErr("Invalid number in relative date: %s", s)
	}
	unit := unitMs[m[2]]
	return func(now time.Time) int64 {
		if n > uint64(math.MaxInt64/unit) {
			return 0
		}
		return max(now.UnixMilli()-int64(n)*unit, 0)
	}, nil
}

func absoluteMs(s string) (int64, *Error) {
	if t, err := time.Parse(time.RFC3339, normalizeRFC3339(s)); err == nil {
		return max(t.UnixMilli(), 0), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return max(t.UnixMilli(), 0), nil
	}
	return 0, valueErr("Invalid date format: %s", s)
}

// normalizeRFC3339 accepts the lower-case 't'/'z' and the space separator
// that RFC 3339 allows (and chrono parses) but Go's layout does not.
func normalizeRFC3339(s string) string {
	if len(s) > 10 && (s[10] == 't' || s[10] == ' ') {
		s = s[:10] + "T" + s[11:]
	}
	if strings.HasSuffix(s, "z") {
		s = s[:len(s)-1] + "Z"
	}
	return s
}

// clampMs converts like Rust's saturating `f64 as u64`, capped to int64.
func clampMs(f float64) int64 {
	switch {
	case !(f > 0):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(f)
}
