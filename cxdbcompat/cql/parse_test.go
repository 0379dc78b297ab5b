package cql

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const validFields = "Valid fields: id, tag, title, label, user, service, host, trace_id, parent, root, created, depth, is_live"

// at builds an expected position: line, column (characters), byte offset.
func at(line, col, off int) *Position { return &Position{Line: line, Column: col, Offset: off} }

func TestParseErrors(t *testing.T) {
	tests := []struct {
		q     string
		typ   string
		msg   string
		pos   *Position
		field string
	}{
		// grammar
		{``, TypeSyntaxError, "Empty query", at(1, 1, 0), ""},
		{"  \n  ", TypeSyntaxError, "Empty query", at(2, 3, 5), ""},
		{`tag = "a" tag`, TypeSyntaxError, "Unexpected token after expression", at(1, 11, 10), ""},
		{`tag = "a")`, TypeSyntaxError, "Unexpected token after expression", at(1, 10, 9), ""},
		{`(tag = "a"`, TypeSyntaxError, "Expected ')' after expression", at(1, 11, 10), ""},
		{`(tag = "a" id = 1)`, TypeSyntaxError, "Expected ')' after expression", at(1, 12, 11), ""},
		{`= "a"`, TypeSyntaxError, "Expected field name", at(1, 1, 0), ""},
		{`tag = "a" AND`, TypeSyntaxError, "Expected field name", at(1, 14, 13), ""},
		{`NOT NOT tag = "a"`, TypeSyntaxError, "Expected field name", at(1, 5, 4), ""},
		{`"tag" = "a"`, TypeSyntaxError, "Expected field name", at(1, 1, 0), ""},
		{`tag "a"`, TypeSyntaxError, "Expected operator", at(1, 5, 4), ""},
		{`tag`, TypeSyntaxError, "Expected operator", at(1, 4, 3), ""},
		{`tag = foo`, TypeSyntaxError, "Expected value", at(1, 7, 6), ""},
		{`tag =`, TypeSyntaxError, "Expected value", at(1, 6, 5), ""},
		{`tag IN ()`, TypeSyntaxError, "Expected value", at(1, 9, 8), ""},
		{`tag IN ("a",)`, TypeSyntaxError, "Expected value", at(1, 13, 12), ""},
		{`tag IN "a"`, TypeSyntaxError, "Expected '(' after IN", at(1, 8, 7), ""},
		{`tag IN ("a" "b")`, TypeSyntaxError, "Expected ')' after list values", at(1, 13, 12), ""},
		{`tag IN ("a"`, TypeSyntaxError, "Expected ')' after list values", at(1, 12, 11), ""},
		// lexical
		{`tag = "abc`, TypeSyntaxError, "Unterminated string starting at line 1, column 7", at(1, 7, 6), ""},
		{"tag = 'a\nb", TypeSyntaxError, "Unterminated string starting at line 1, column 7", at(1, 7, 6), ""},
		{`tag = "abc\`, TypeSyntaxError, "Unterminated escape sequence", at(1, 12, 11), ""},
		{`tag = "a" & x`, TypeSyntaxError, "Unexpected character '&' at line 1, column 11", at(1, 11, 10), ""},
		{"id = 1\n  OR é€ = 2 $", TypeSyntaxError, "Unexpected character '€' at line 2, column 7", at(2, 7, 14), ""},
		{`id = 1.2.3`, TypeSyntaxError, "Unexpected character '.' at line 1, column 9", at(1, 9, 8), ""},
		{`tag ! "a"`, TypeSyntaxError, "Expected '=' after '!' at line 1, column 5", at(1, 5, 4), ""},
		{`tag ~ "a"`, TypeSyntaxError, "Expected '=' after '~' at line 1, column 5", at(1, 5, 4), ""},
		{`tag ^ "a"`, TypeSyntaxError, "Expected '=' or '~=' after '^' at line 1, column 5", at(1, 5, 4), ""},
		{`tag ^~ "a"`, TypeSyntaxError, "Expected '=' after '^~' at line 1, column 5", at(1, 5, 4), ""},
		{`tag = -x`, TypeSyntaxError, "Unexpected character '-' at line 1, column 7", at(1, 7, 6), ""},
		// a lexical error anywhere wins over an earlier grammar error
		{`) tag = "a" $`, TypeSyntaxError, "Unexpected character '$' at line 1, column 13", at(1, 13, 12), ""},
		// grammar errors win over validation errors
		{`id = "x" AND (`, TypeSyntaxError, "Expected field name", at(1, 15, 14), ""},
		{strings.Repeat("(", 300) + `id = 1` + strings.Repeat(")", 300),
			TypeSyntaxError, "Expression nested too deeply", at(1, 257, 256), ""},
		// unknown fields (case-sensitive), positions count characters
		{`foo = 1`, TypeUnknownField, "Unknown field 'foo'. " + validFields, at(1, 1, 0), "foo"},
		{`TAG = "a"`, TypeUnknownField, "Unknown field 'TAG'. " + validFields, at(1, 1, 0), "TAG"},
		{`true = 1`, TypeUnknownField, "Unknown field 'true'. " + validFields, at(1, 1, 0), "true"},
		{`title = "héllo" AND x = 1`, TypeUnknownField, "Unknown field 'x'. " + validFields, at(1, 21, 21), "x"},
		{"id = 1\nOR\n  _x = 2", TypeUnknownField, "Unknown field '_x'. " + validFields, at(3, 3, 12), "_x"},
		{`id = "x" AND foo = 1`, TypeUnknownField, "Unknown field 'foo'. " + validFields, at(1, 14, 13), "foo"},
		// unsupported operators (no position, as in the reference)
		{`id ^= 1`, TypeInvalidOperator, "Operator Starts not supported for id field", nil, ""},
		{`id > 1`, TypeInvalidOperator, "Operator Gt not supported for id field", nil, ""},
		{`tag > "a"`, TypeInvalidOperator, "Operator Gt not supported for string fields", nil, ""},
		{`host <= "a"`, TypeInvalidOperator, "Operator Lte not supported for string fields", nil, ""},
		{`label ~= "a"`, TypeInvalidOperator, "Operator EqCi not supported for label field", nil, ""},
		{`label ^= "a"`, TypeInvalidOperator, "Operator Starts not supported for label field", nil, ""},
		{`trace_id IN ("a")`, TypeInvalidOperator, "Operator In not supported for trace_id field", nil, ""},
		{`trace_id ^~= "a"`, TypeInvalidOperator, "Operator StartsCi not supported for trace_id field", nil, ""},
		{`parent < 3`, TypeInvalidOperator, "Operator Lt not supported for parent field", nil, ""},
		{`root >= 1`, TypeInvalidOperator, "Operator Gte not supported for root field", nil, ""},
		{`depth ^= 1`, TypeInvalidOperator, "Operator Starts not supported for depth field", nil, ""},
		{`created ~= "2026-01-02"`, TypeInvalidOperator, "Operator EqCi not supported for created field", nil, ""},
		{`is_live != true`, TypeInvalidOperator, "Operator Neq not supported for is_live field", nil, ""},
		// wrong value kinds
		{`tag = 5`, TypeInvalidValue, "Expected string value", nil, ""},
		{`host ^~= 5`, TypeInvalidValue, "Expected string value", nil, ""},
		{`label = 1`, TypeInvalidValue, "Expected string value", nil, ""},
		{`trace_id != 1`, TypeInvalidValue, "Expected string value", nil, ""},
		{`id = "5"`, TypeInvalidValue, "Expected numeric value for id", nil, ""},
		{`parent = "x"`, TypeInvalidValue, "Expected numeric value for parent", nil, ""},
		{`root != true`, TypeInvalidValue, "Expected numeric value for root", nil, ""},
		{`depth > "3"`, TypeInvalidValue, "Expected numeric value for depth", nil, ""},
		{`depth IN (1)`, TypeInvalidValue, "Expected numeric value for depth", nil, ""},
		{`created IN ("2026-01-02")`, TypeInvalidValue, "Expected date value", nil, ""},
		{`created > true`, TypeInvalidValue, "Invalid date format: true", nil, ""},
		{`created > "yesterday"`, TypeInvalidValue, "Invalid date format: yesterday", nil, ""},
		{`created > "2026-13-01"`, TypeInvalidValue, "Invalid date format: 2026-13-01", nil, ""},
		{`created > "-5w"`, TypeInvalidValue, "Invalid date format: -5w", nil, ""},
		{`created > "-99999999999999999999d"`, TypeInvalidValue, "Invalid number in relative date: -99999999999999999999d", nil, ""},
		{`is_live = 1`, TypeInvalidValue, "Expected boolean value for is_live", nil, ""},
		{`is_live = "-5m"`, TypeInvalidValue, "Expected boolean value for is_live", nil, ""},
		{`is_live IN (true)`, TypeInvalidValue, "Expected boolean value for is_live", nil, ""},
		// the leftmost validation error is reported
		{`tag > "a" OR id = "x"`, TypeInvalidOperator, "Operator Gt not supported for string fields", nil, ""},
		{`NOT (id = 1 AND (tag = 1 OR id ^= 2))`, TypeInvalidValue, "Expected string value", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			q, err := Parse(tt.q)
			if q != nil {
				t.Fatalf("Parse succeeded, want %s %q", tt.typ, tt.msg)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not *Error", err, err)
			}
			if e.Type != tt.typ || e.Message != tt.msg || e.Field != tt.field {
				t.Errorf("got %s %q field %q, want %s %q field %q", e.Type, e.Message, e.Field, tt.typ, tt.msg, tt.field)
			}
			if !samePosition(e.Position, tt.pos) {
				t.Errorf("position %+v, want %+v", e.Position, tt.pos)
			}
		})
	}
}

func samePosition(a, b *Position) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func TestParseAccepts(t *testing.T) {
	for _, q := range []string{
		`tag = "a"`,
		`tag = 'it\'s'`,
		`tag IN ("a")`,
		`tag in ('a', "b")`,
		`id IN (1, 2.5, -3)`,
		`title = "-5m"`,
		`created > "-7d" AND created < "-5h" OR created >= "-10m"`,
		`created >= "2026-01-02" AND created < "2026-01-02T10:00:00.123+02:00"`,
		`is_live = False`,
		`label = "env=prod"`,
		`tag = "名前"`,
		`depth>=2 AND depth<=3`,
		`tag="a"`,
	} {
		if _, err := Parse(q); err != nil {
			t.Errorf("Parse(%q): %v", q, err)
		}
	}
}

func TestStringLexing(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{`"plain"`, "plain"},
		{`'single "inner"'`, `single "inner"`},
		{`"a\nb\tc\rd"`, "a\nb\tc\rd"},
		{`"q\"q\'q\\q"`, `q"q'q\q`},
		{`"\q\é"`, "qé"},
		{`"é€"`, "é€"},
		{`""`, ""},
	} {
		toks, err := tokenize(tt.src)
		if err != nil || toks[0].kind != tokString || toks[0].text != tt.want {
			t.Errorf("tokenize(%s) = %+v, %v; want string %q", tt.src, toks, err, tt.want)
		}
	}
}

func TestNumberAndValueLexing(t *testing.T) {
	for _, tt := range []struct {
		src  string
		kind valueKind
		num  float64
		str  string
	}{
		{`12`, valNumber, 12, ""},
		{`-3.5`, valNumber, -3.5, ""},
		{`7.`, valNumber, 7, ""},
		{`TRUE`, valString, 0, "true"},
		{`fAlSe`, valString, 0, "false"},
		{`"-15m"`, valDate, 0, "-15m"},
		{`"-15M"`, valString, 0, "-15M"},
		{`"x-15m"`, valString, 0, "x-15m"},
	} {
		toks, err := tokenize(tt.src)
		if err != nil {
			t.Fatalf("tokenize(%s): %v", tt.src, err)
		}
		v, perr := (&parser{toks: toks}).value()
		if perr != nil || v.kind != tt.kind || v.num != tt.num || v.str != tt.str {
			t.Errorf("value(%s) = %+v, %v", tt.src, v, perr)
		}
	}
}

func TestErrorJSON(t *testing.T) {
	for _, tt := range []struct{ q, want string }{
		{`foo = 1`, `{"error":"Unknown field 'foo'. ` + validFields + `","error_type":"UnknownField","position":{"line":1,"column":1,"offset":0},"field":"foo"}`},
		{``, `{"error":"Empty query","error_type":"SyntaxError","position":{"line":1,"column":1,"offset":0},"field":null}`},
		{`id ^= 1`, `{"error":"Operator Starts not supported for id field","error_type":"InvalidOperator","position":null,"field":null}`},
	} {
		_, err := Parse(tt.q)
		got, jerr := json.Marshal(err)
		if jerr != nil || string(got) != tt.want {
			t.Errorf("%q: JSON %s (%v)\nwant %s", tt.q, got, jerr, tt.want)
		}
	}
}

func TestErrorString(t *testing.T) {
	_, err := Parse(`tag "a"`)
	if got, want := err.Error(), "Expected operator (line 1, column 5)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	_, err = Parse(`tag = 1`)
	if got, want := err.Error(), "Expected string value"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
