package cql

import (
	"encoding/json"
	"fmt"
)

// Error types, spelled as the reference's search endpoint reports them in
// "error_type".
const (
	TypeSyntaxError     = "SyntaxError"
	TypeUnknownField    = "UnknownField"
	TypeInvalidOperator = "InvalidOperator"
	TypeInvalidValue    = "InvalidValue"
)

// Position locates an error in the query text. Line and Column are 1-based
// and count characters; Offset counts bytes from the start of the query.
type Position struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Offset int `json:"offset"`
}

// Error is a CQL parse or validation error. Syntax and unknown-field errors
// carry a Position; operator and value errors do not, because the reference
// detects them while executing the query, where positions are gone.
type Error struct {
	Message  string
	Type     string
	Position *Position
	// Field names the offending field; "" when the error has none.
	Field string
}

// Error formats the message the way the reference's Display does.
func (e *Error) Error() string {
	if e.Position == nil {
		return e.Message
	}
	return fmt.Sprintf("%s (line %d, column %d)", e.Message, e.Position.Line, e.Position.Column)
}

// errorBody is the 400 body of GET /v1/contexts/search (reference §4.6).
type errorBody struct {
	Error     string    `json:"error"`
	ErrorType string    `json:"error_type"`
	Position  *Position `json:"position"`
	Field     *string   `json:"field"`
}

// MarshalJSON renders the search endpoint's error body:
// {"error":…,"error_type":…,"position":{…}|null,"field":"…"|null}.
func (e *Error) MarshalJSON() ([]byte, error) {
	body := errorBody{Error: e.Message, ErrorType: e.Type, Position: e.Position}
	if e.Field != "" {
		f := e.Field
		body.Field = &f
	}
	return json.Marshal(body)
}

func syntaxErr(pos Position, format string, args ...any) *Error {
	return &Error{Message: fmt.Sprintf(format, args...), Type: TypeSyntaxError, Position: &pos}
}

func valueErr(format string, args ...any) *Error {
	return &Error{Message: fmt.Sprintf(format, args...), Type: TypeInvalidValue}
}

func operatorErr(op operator, target string) *Error {
	return &Error{
		Message: fmt.Sprintf("Operator %s not supported for %s", op, target),
		Type:    TypeInvalidOperator,
	}
}
