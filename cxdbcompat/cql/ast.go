package cql

import (
	"slices"
	"time"
)

// operator is a comparison operator. Its String form is the reference's
// Rust variant name, which appears verbatim in InvalidOperator messages.
type operator int

const (
	opEq operator = iota
	opNeq
	opStarts
	opEqCi
	opStartsCi
	opGt
	opGte
	opLt
	opLte
	opIn
)

var operatorNames = [...]string{"Eq", "Neq", "Starts", "EqCi", "StartsCi", "Gt", "Gte", "Lt", "Lte", "In"}

func (o operator) String() string { return operatorNames[o] }

type valueKind int

const (
	valString valueKind = iota
	valNumber
	valDate // a string shaped like a relative date ("-7d")
	valList
)

type value struct {
	kind valueKind
	str  string  // valString, valDate
	num  float64 // valNumber
	list []value // valList
}

// asString accepts relative-date values too, so "-5m" stays usable as text.
func (v value) asString() (string, bool) {
	return v.str, v.kind == valString || v.kind == valDate
}

// asUint truncates like Rust's saturating `f64 as u64`: negatives become 0
// and values past the range become the maximum.
func (v value) asUint() (uint64, bool) {
	if v.kind != valNumber {
		return 0, false
	}
	switch {
	case !(v.num > 0): // also NaN
		return 0, true
	case v.num >= 1<<64:
		return 1<<64 - 1, true
	}
	return uint64(v.num), true
}

// node is one expression of the parsed tree.
type node interface {
	match(r *Record, now time.Time) bool
}

// andNode and orNode hold a whole chain of operands, so long flat queries
// do not turn into deep trees.
type (
	andNode []node
	orNode  []node
	notNode struct{ inner node }
)

// predicate tests one record; now anchors relative dates.
type predicate func(r *Record, now time.Time) bool

type comparison struct {
	field string
	op    operator
	val   value
	test  predicate // set by compile once the whole query has parsed
}

func (n andNode) match(r *Record, now time.Time) bool {
	return !slices.ContainsFunc(n, func(c node) bool { return !c.match(r, now) })
}

func (n orNode) match(r *Record, now time.Time) bool {
	return slices.ContainsFunc(n, func(c node) bool { return c.match(r, now) })
}

func (n notNode) match(r *Record, now time.Time) bool { return !n.inner.match(r, now) }

func (c *comparison) match(r *Record, now time.Time) bool { return c.test(r, now) }
