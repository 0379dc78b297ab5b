package client

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

var (
	// ErrClosed is returned by calls on (or interrupted by) a closed Client.
	ErrClosed = errors.New("cxdb client: closed")
	// ErrNotFound matches a *ServerError with code 404 under errors.Is.
	ErrNotFound = errors.New("cxdb: not found")
	// ErrUnexpectedResponse reports a response frame of the wrong type.
	ErrUnexpectedResponse = errors.New("cxdb client: unexpected response type")
)

// ServerError is an ERROR frame returned by the server. The connection
// stays usable after one.
type ServerError struct {
	// Code is the HTTP-style status code (404, 422, …).
	Code uint32
	// Kind is the symbolic code from a JSON detail, e.g. "NOT_FOUND"; empty
	// when the server sent a plain-text detail.
	Kind string
	// Message is the human-readable detail.
	Message string
}

// Error formats the error as "cxdb server error CODE [KIND]: MESSAGE".
func (e *ServerError) Error() string {
	if e.Kind == "" {
		return fmt.Sprintf("cxdb server error %d: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("cxdb server error %d %s: %s", e.Code, e.Kind, e.Message)
}

// Is reports whether target is ErrNotFound and the code is 404.
func (e *ServerError) Is(target error) bool { return target == ErrNotFound && e.Code == 404 }

// serverError decodes an ERROR payload. Like the official client it never
// fails: a payload shorter than 8 bytes becomes code 0, and a detail that
// does not fit becomes the message "unknown error".
func serverError(payload []byte) *ServerError {
	r, err := cxdbcompat.DecodeErrorResponse(payload)
	if err == nil {
		return &ServerError{Code: r.Code, Kind: r.Kind, Message: r.Message}
	}
	e := &ServerError{Message: "unknown error"}
	if len(payload) >= 8 {
		e.Code = binary.LittleEndian.Uint32(payload)
	}
	return e
}
