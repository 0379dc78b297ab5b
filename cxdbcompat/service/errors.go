package service

import (
	"fmt"
	"strconv"
)

// Kind classifies the service's own errors; the surfaces map them to
// statuses.
type Kind int

// Kinds of Error.
const (
	// KindInvalid is a malformed parameter (HTTP 400).
	KindInvalid Kind = iota + 1
	// KindNotFound is an unknown id (HTTP 404).
	KindNotFound
	// KindUnprocessable is well-formed input the data does not allow
	// (HTTP 422).
	KindUnprocessable
)

// Error is a service error: what is wrong, and with which parameter.
type Error struct {
	Kind    Kind
	Message string
	Details map[string]any
}

func (e *Error) Error() string { return e.Message }

func invalidParam(param, format string, args ...any) *Error {
	return &Error{Kind: KindInvalid, Message: param + ": " + fmt.Sprintf(format, args...), Details: map[string]any{"parameter": param}}
}

func notFound(format string, args ...any) *Error {
	return &Error{Kind: KindNotFound, Message: fmt.Sprintf(format, args...)}
}

func unprocessable(details map[string]any, format string, args ...any) *Error {
	return &Error{Kind: KindUnprocessable, Message: fmt.Sprintf(format, args...), Details: details}
}

// idString renders an id as CXDB's HTTP JSON does: a decimal string.
func idString(id uint64) string { return strconv.FormatUint(id, 10) }
