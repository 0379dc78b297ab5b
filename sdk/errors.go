package sdk

import (
	"errors"
	"fmt"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrNotFound: an unknown context, turn, blob, bundle or fs root
	// (another tenant's count as unknown).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request contradicts what is stored, such as an
	// idempotency key reused for another append, or a bundle id
	// republished with other content.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the request is malformed (bad id, bad hash, bad bundle).
	ErrInvalid = errors.New("invalid request")
	// ErrUnauthorized: the API key is missing, unknown, revoked, or may
	// not do this.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrUnavailable: the server could not be reached or answered 503
	// until the retries or the caller's deadline ran out.
	ErrUnavailable = errors.New("server unavailable")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("store closed")
	// ErrHeadMoved: a conditional append (AppendRequest.IfHead) found
	// another head than its parent; HeadMovedTo says which. It is an
	// ErrConflict too.
	ErrHeadMoved = errors.New("head moved")
	// ErrUnsupported: the server did not announce the extension a request
	// needs (a conditional append to a server that would ignore it).
	ErrUnsupported = errors.New("not supported by the server")
)

// HeadMovedTo returns the context's head a conditional append found
// instead of its parent, when err is ErrHeadMoved.
func HeadMovedTo(err error) (TurnID, bool) {
	var se *ServerError
	if !errors.As(err, &se) || se.Kind != kindHeadMoved {
		return "", false
	}
	head, _ := se.Details["head_turn_id"].(string)
	if head == "0" {
		head = ""
	}
	return TurnID(head), true
}

// kindHeadMoved is the server's code of ErrHeadMoved.
const kindHeadMoved = "HEAD_MOVED"

// ServerError is an error the server answered with, on either surface.
// errors.Is matches it against the sentinel of its status code.
type ServerError struct {
	// Code is the HTTP-style status (404, 409, 503, ...).
	Code int
	// Kind is the server's symbolic code, e.g. "NOT_FOUND".
	Kind string
	// Message is the server's explanation.
	Message string
	// Details are facts beside the message, such as the original turn of
	// a reused idempotency key ("original_turn_id").
	Details map[string]any
}

// Error formats the status, kind and message.
func (e *ServerError) Error() string {
	if e.Kind == "" {
		return fmt.Sprintf("server error %d: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("server error %d %s: %s", e.Code, e.Kind, e.Message)
}

// Is maps the status code to the sentinel errors.
func (e *ServerError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == 404
	case ErrConflict:
		return e.Code == 409
	case ErrHeadMoved:
		return e.Code == 409 && e.Kind == kindHeadMoved
	case ErrInvalid:
		return e.Code == 400 || e.Code == 413 || e.Code == 422
	case ErrUnauthorized:
		return e.Code == 401 || e.Code == 403
	case ErrUnavailable:
		return e.Code == 503
	}
	return false
}

// retryable reports whether a server answer may change on a retry: the
// server was unavailable, or is shutting down, or limits our rate.
func (e *ServerError) retryable() bool { return e.Code == 503 || e.Code == 429 }
