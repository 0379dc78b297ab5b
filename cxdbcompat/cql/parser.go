package cql

import (
	"regexp"
	"strings"
	"time"
)

// maxNesting bounds parenthesis depth. The reference has no limit (and
// would overflow its stack); a bound keeps untrusted queries cheap.
const maxNesting = 256

// relativeDate is the reference's pattern. \p{Nd} mirrors Rust's Unicode
// \d: non-ASCII digits still make a date value, which then fails to parse.
var relativeDate = regexp.MustCompile(`^-(\p{Nd}+)([hdm])$`)

// Query is a parsed and validated CQL query, safe for concurrent use.
type Query struct {
	root node
}

// Parse parses and validates a CQL query (reference §8). Errors are *Error.
// Syntax errors come first, then field, operator and value errors in
// left-to-right order, matching what the reference reports.
func Parse(q string) (*Query, error) {
	root, err := parseTree(q)
	if err == nil {
		err = compileTree(root)
	}
	if err != nil {
		return nil, err
	}
	return &Query{root: root}, nil
}

// Match reports whether r satisfies the query. Every record given counts as
// indexed, so != and NOT are complements within whatever is evaluated.
// Relative dates are measured back from now.
func (q *Query) Match(r *Record, now time.Time) bool {
	return q.root.match(r, now)
}

type parser struct {
	toks  []token
	i     int
	depth int
}

func parseTree(q string) (node, *Error) {
	toks, err := tokenize(q)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	if p.cur().kind == tokEOF {
		return nil, syntaxErr(p.cur().pos, "Empty query")
	}
	root, err := p.orExpr()
	if err == nil && p.cur().kind != tokEOF {
		err = syntaxErr(p.cur().pos, "Unexpected token after expression")
	}
	return root, err
}

func (p *parser) cur() token { return p.toks[p.i] }

// accept consumes the current token if it is of kind k. Nothing asks for
// tokEOF, the last token, so cur stays in range.
func (p *parser) accept(k tokenKind) bool {
	if p.cur().kind != k {
		return false
	}
	p.i++
	return true
}

func (p *parser) orExpr() (node, *Error) {
	return p.chain(tokOr, p.andExpr, func(ns []node) node { return orNode(ns) })
}

func (p *parser) andExpr() (node, *Error) {
	return p.chain(tokAnd, p.unary, func(ns []node) node { return andNode(ns) })
}

// chain parses operand { sep operand }; a single operand stays unwrapped.
func (p *parser) chain(sep tokenKind, operand func() (node, *Error), wrap func([]node) node) (node, *Error) {
	first, err := operand()
	if err != nil {
		return nil, err
	}
	nodes := []node{first}
	for p.accept(sep) {
		n, err := operand()
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 1 {
		return first, nil
	}
	return wrap(nodes), nil
}

// unary allows a single NOT: a second one lands in comparison and fails
// with "Expected field name", as in the reference.
func (p *parser) unary() (node, *Error) {
	if !p.accept(tokNot) {
		return p.primary()
	}
	inner, err := p.primary()
	if err != nil {
		return nil, err
	}
	return notNode{inner: inner}, nil
}

func (p *parser) primary() (node, *Error) {
	open := p.cur().pos
	if !p.accept(tokLParen) {
		return p.comparison()
	}
	if p.depth++; p.depth > maxNesting {
		return nil, syntaxErr(open, "Expression nested too deeply")
	}
	defer func() { p.depth-- }()
	n, err := p.orExpr()
	if err == nil && !p.accept(tokRParen) {
		err = syntaxErr(p.cur().pos, "Expected ')' after expression")
	}
	return n, err
}

func (p *parser) comparison() (node, *Error) {
	field := p.cur()
	if !p.accept(tokIdent) {
		return nil, syntaxErr(field.pos, "Expected field name")
	}
	if !knownField(field.text) {
		return nil, unknownFieldErr(field)
	}
	op := p.cur()
	var val value
	var err *Error
	switch {
	case p.accept(tokIn):
		op.op = opIn
		val, err = p.list()
	case p.accept(tokOp):
		val, err = p.value()
	default:
		return nil, syntaxErr(op.pos, "Expected operator")
	}
	if err != nil {
		return nil, err
	}
	return &comparison{field: field.text, op: op.op, val: val}, nil
}

func (p *parser) list() (value, *Error) {
	if !p.accept(tokLParen) {
		return value{}, syntaxErr(p.cur().pos, "Expected '(' after IN")
	}
	var vals []value
	for {
		v, err := p.value()
		if err != nil {
			return value{}, err
		}
		vals = append(vals, v)
		if !p.accept(tokComma) {
			break
		}
	}
	if !p.accept(tokRParen) {
		return value{}, syntaxErr(p.cur().pos, "Expected ')' after list values")
	}
	return value{kind: valList, list: vals}, nil
}

func (p *parser) value() (value, *Error) {
	t := p.cur()
	switch {
	case p.accept(tokString):
		if relativeDate.MatchString(t.text) {
			return value{kind: valDate, str: t.text}, nil
		}
		return value{kind: valString, str: t.text}, nil
	case p.accept(tokNumber):
		return value{kind: valNumber, num: t.num}, nil
	case t.kind == tokIdent && isBool(t.text):
		p.i++
		return value{kind: valString, str: strings.ToLower(t.text)}, nil
	}
	return value{}, syntaxErr(t.pos, "Expected value")
}

// isBool lower-cases like the reference; EqualFold would also accept
// folding variants such as "falſe".
func isBool(s string) bool {
	l := strings.ToLower(s)
	return l == "true" || l == "false"
}
