package cql

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokAnd
	tokOr
	tokNot
	tokIn
	tokLParen
	tokRParen
	tokComma
	tokOp
	tokString
	tokNumber
	tokIdent
)

type token struct {
	kind tokenKind
	op   operator // tokOp
	text string   // tokString (unescaped), tokIdent
	num  float64  // tokNumber
	pos  Position
}

// lexer walks the query rune by rune so that columns count characters while
// offsets count bytes, as the reference reports them.
type lexer struct {
	src  string
	off  int
	line int
	col  int
}

// tokenize lexes the whole query up front: like the reference, a lexical
// error anywhere wins over a grammar error earlier in the text.
func tokenize(src string) ([]token, *Error) {
	l := &lexer{src: src, line: 1, col: 1}
	var toks []token
	for {
		t, err := l.next()
		if err != nil {
			return nil, err
		}
		toks = append(toks, t)
		if t.kind == tokEOF {
			return toks, nil
		}
	}
}

func (l *lexer) pos() Position {
	return Position{Line: l.line, Column: l.col, Offset: l.off}
}

// peek returns the next rune, or -1 at the end of input.
func (l *lexer) peek() rune {
	if l.off >= len(l.src) {
		return -1
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.off:])
	return r
}

func (l *lexer) advance() rune {
	if l.off >= len(l.src) {
		return -1
	}
	r, w := utf8.DecodeRuneInString(l.src[l.off:])
	l.off += w
	if r == '\n' {
		l.line++
		l.col = 1
	} else {
		l.col++
	}
	return r
}

func (l *lexer) next() (token, *Error) {
	for unicode.IsSpace(l.peek()) {
		l.advance()
	}
	start := l.pos()
	r := l.peek()
	switch {
	case r == -1:
		return token{kind: tokEOF, pos: start}, nil
	case r == '"' || r == '\'':
		return l.readString(r)
	case isASCIIDigit(r) || (r == '-' && l.off+1 < len(l.src) && isASCIIDigit(rune(l.src[l.off+1]))):
		return l.readNumber(), nil
	case unicode.IsLetter(r) || r == '_':
		return l.readIdent(), nil
	}
	l.advance()
	switch r {
	case '(':
		return token{kind: tokLParen, pos: start}, nil
	case ')':
		return token{kind: tokRParen, pos: start}, nil
	case ',':
		return token{kind: tokComma, pos: start}, nil
	}
	return l.readOperator(r, start)
}

func isASCIIDigit(r rune) bool { return r >= '0' && r <= '9' }

// readOperator finishes an operator whose first rune r was consumed.
func (l *lexer) readOperator(r rune, start Position) (token, *Error) {
	tok := token{kind: tokOp, pos: start}
	var err *Error
	switch r {
	case '=':
		tok.op = opEq
	case '>':
		tok.op = l.orEq(opGt, opGte)
	case '<':
		tok.op = l.orEq(opLt, opLte)
	case '!':
		tok.op, err = opNeq, l.expectEq(start, "Expected '=' after '!'")
	case '~':
		tok.op, err = opEqCi, l.expectEq(start, "Expected '=' after '~'")
	case '^':
		tok.op, err = l.readCaret(start)
	default:
		err = syntaxErr(start, "Unexpected character '%c' at line %d, column %d", r, start.Line, start.Column)
	}
	return tok, err
}

// orEq returns withEq, consuming the '=', when one follows; else bare.
func (l *lexer) orEq(bare, withEq operator) operator {
	if l.peek() != '=' {
		return bare
	}
	l.advance()
	return withEq
}

// readCaret finishes "^=" or "^~=" after the '^' at start.
func (l *lexer) readCaret(start Position) (operator, *Error) {
	switch l.peek() {
	case '=':
		l.advance()
		return opStarts, nil
	case '~':
		l.advance()
		return opStartsCi, l.expectEq(start, "Expected '=' after '^~'")
	}
	return 0, atStart(start, "Expected '=' or '~=' after '^'")
}

// expectEq consumes a '=' or reports msg at the operator's start.
func (l *lexer) expectEq(start Position, msg string) *Error {
	if l.peek() != '=' {
		return atStart(start, msg)
	}
	l.advance()
	return nil
}

// atStart builds a lexical error whose message also spells out the
// location, as the reference's operator errors do.
func atStart(start Position, msg string) *Error {
	return syntaxErr(start, "%s at line %d, column %d", msg, start.Line, start.Column)
}

func (l *lexer) readString(quote rune) (token, *Error) {
	start := l.pos()
	l.advance()
	var b strings.Builder
	for {
		switch r := l.advance(); r {
		case -1:
			return token{}, syntaxErr(start, "Unterminated string starting at line %d, column %d", start.Line, start.Column)
		case quote:
			return token{kind: tokString, text: b.String(), pos: start}, nil
		case '\\':
			e := l.advance()
			if e == -1 {
				return token{}, syntaxErr(l.pos(), "Unterminated escape sequence")
			}
			b.WriteRune(unescape(e))
		default:
			b.WriteRune(r)
		}
	}
}

// unescape maps the character after a backslash; unknown escapes keep the
// character itself, as the reference does.
func unescape(r rune) rune {
	switch r {
	case 'n':
		return '\n'
	case 't':
		return '\t'
	case 'r':
		return '\r'
	}
	return r
}

func (l *lexer) readNumber() token {
	start := l.pos()
	if l.peek() == '-' {
		l.advance()
	}
	l.skipDigits()
	if l.peek() == '.' {
		l.advance()
		l.skipDigits()
	}
	// Only digits, '-' and '.' were consumed, so the sole possible failure
	// is a range error, for which ParseFloat still returns ±Inf.
	n, _ := strconv.ParseFloat(l.src[start.Offset:l.off], 64)
	return token{kind: tokNumber, num: n, pos: start}
}

func (l *lexer) skipDigits() {
	for isASCIIDigit(l.peek()) {
		l.advance()
	}
}

// keywords are matched case-insensitively; everything else is an identifier.
var keywords = map[string]tokenKind{"AND": tokAnd, "OR": tokOr, "NOT": tokNot, "IN": tokIn}

func (l *lexer) readIdent() token {
	start := l.pos()
	for r := l.peek(); unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_'; r = l.peek() {
		l.advance()
	}
	text := l.src[start.Offset:l.off]
	if k, ok := keywords[strings.ToUpper(text)]; ok {
		return token{kind: k, pos: start}
	}
	return token{kind: tokIdent, text: text, pos: start}
}
