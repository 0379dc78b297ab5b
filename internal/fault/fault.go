// Package fault is cardbox's one error vocabulary. Every package on a
// request's path says what went wrong as an *Error of some Kind; each
// surface maps the kind to its wire form in one place, by the one table
// below: the HTTP error handler (api) to a status and a string code, the
// binary server's ERROR frame builder (cxdbcompat/server) to a code and
// the same string.
package fault

import (
	"errors"
	"fmt"

	"github.com/cardboxhq/cardbox/internal/pgerr"
)

// Kind classifies an error by what the client should make of it.
type Kind int

// Kinds of errors. The zero Kind is Internal, so an Error nobody
// classified is answered as a fault of the server.
const (
	Internal             Kind = iota // a bug or an I/O failure; its cause is logged, not sent
	Invalid                          // malformed input
	Unauthorized                     // no API key, or one that is unknown, revoked or expired
	Forbidden                        // the key's role may not do this
	NotFound                         // an unknown context, turn, blob, card, box, tenant, key or route
	MethodNotAllowed                 // the route exists with other methods
	RequestTimeout                   // the request body arrived too slowly
	Conflict                         // the request contradicts what is stored or what it declared (hash, length, a reused key)
	TooLarge                         // an HTTP request body over the configured limit
	FrameTooLarge                    // a binary frame over the configured limit
	UnsupportedMediaType             // a body in a media type the route does not take
	Unprocessable                    // well-formed but unsupported or not allowed by the data
	UnknownMessage                   // a binary message type the server does not know
	RateLimited                      // the tenant's request rate limit is reached
	ClientClosed                     // the client went away before the answer (logged, never received)
	Unavailable                      // the database is unreachable, the server is busy or shutting down; retry
	TooManyConnections               // the server or the tenant is at its connection limit; retry later
	DiskFull                         // the data directory's file system, or Postgres's, is full
	QuotaExceeded                    // the write would take the tenant over its storage quota (not a full disk)
	HeadMoved                        // a conditional append found another head than the parent it named
)

// wire is how the surfaces send a kind.
type wire struct {
	status int    // HTTP status
	code   uint32 // binary ERROR frame code
	name   string // the string code both surfaces send (the JSON body's kind, the frame's kind)
}

// table is the one place where kinds become wire codes. Several kinds
// share a status (413, 422, 503, 507); the name tells them apart.
var table = [...]wire{
	Internal:             {500, 500, "INTERNAL"},
	Invalid:              {400, 400, "BAD_REQUEST"},
	Unauthorized:         {401, 401, "UNAUTHORIZED"},
	Forbidden:            {403, 403, "FORBIDDEN"},
	NotFound:             {404, 404, "NOT_FOUND"},
	MethodNotAllowed:     {405, 405, "METHOD_NOT_ALLOWED"},
	RequestTimeout:       {408, 408, "REQUEST_TIMEOUT"},
	Conflict:             {409, 409, "CONFLICT"},
	TooLarge:             {413, 413, "PAYLOAD_TOO_LARGE"},
	FrameTooLarge:        {413, 413, "FRAME_TOO_LARGE"},
	UnsupportedMediaType: {415, 415, "UNSUPPORTED_MEDIA_TYPE"},
	Unprocessable:        {422, 422, "UNPROCESSABLE"},
	UnknownMessage:       {422, 422, "UNKNOWN_MESSAGE"},
	RateLimited:          {429, 429, "RATE_LIMITED"},
	ClientClosed:         {499, 499, "CLIENT_CLOSED"},
	Unavailable:          {503, 503, "UNAVAILABLE"},
	TooManyConnections:   {503, 503, "TOO_MANY_CONNECTIONS"},
	DiskFull:             {507, 507, "DISK_FULL"},
	QuotaExceeded:        {507, 507, "QUOTA_EXCEEDED"},
	HeadMoved:            {409, 409, "HEAD_MOVED"},
}

// Kinds lists every Kind, for the tests that check each surface maps them
// all.
var Kinds = func() []Kind {
	ks := make([]Kind, len(table))
	for i := range table {
		ks[i] = Kind(i)
	}
	return ks
}()

func (k Kind) wire() wire {
	if k < 0 || int(k) >= len(table) {
		return table[Internal]
	}
	return table[k]
}

// Status is the HTTP status the kind is answered with.
func (k Kind) Status() int { return k.wire().status }

// Code is the code of the binary protocol's ERROR frame for the kind.
func (k Kind) Code() uint32 { return k.wire().code }

// String returns the kind's wire name, e.g. "NOT_FOUND".
func (k Kind) String() string {
	if k < 0 || int(k) >= len(table) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return table[k].name
}

// KindOfStatus returns the first kind answered with an HTTP status, for
// errors that come with a status only (the HTTP framework's); ok is false
// for a status no kind has.
func KindOfStatus(status int) (k Kind, ok bool) {
	for i, w := range table {
		if w.status == status {
			return Kind(i), true
		}
	}
	return Internal, false
}

// Error is a failure with its kind and a message for the client.
type Error struct {
	Kind    Kind
	Message string
	// Details are facts for the client beside the message (the parameter
	// at fault, the turn a reused idempotency key names); nil for most
	// errors.
	Details map[string]any
	// Err is the cause, if any; it is not shown to clients for internal
	// errors.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ClientMessage is what the client is told: the message and its cause,
// but only the message of an internal error, whose cause may name files
// (it is logged instead).
func (e *Error) ClientMessage() string {
	if e.Kind == Internal {
		return e.Message
	}
	return e.Error()
}

// With adds a detail to e and returns e.
func (e *Error) With(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// New returns an error of kind with a formatted message.
func New(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns err, the cause, as an error of kind with a formatted
// message. It is where a Postgres error takes its kind: a cause
// internal/pgerr classifies as a full disk (SQLSTATE 53100, an ERROR or
// the PANIC of a WAL write) is DiskFull whatever kind the caller named,
// so that every path (a group's statement or COMMIT, a lookup, a registry
// write) answers it 507 DISK_FULL, as a full data directory is; the other
// classes keep the caller's kind.
func Wrap(kind Kind, err error, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if pgerr.DiskFull(err) {
		kind = DiskFull
		msg += ": Postgres's disk is full; free space on it and retry"
	}
	return &Error{Kind: kind, Message: msg, Err: err}
}

// KindOf reports the kind of err: Internal unless err is or wraps an
// *Error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}

// From returns err as an *Error for a surface to send: the *Error it is
// or wraps; else, for a Postgres error no package classified, the kind
// internal/pgerr gives it (a full disk, Postgres unavailable); else an
// internal error that says nothing of err (the surface logs it).
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch pgerr.Classify(err) {
	case pgerr.ClassDiskFull:
		return New(DiskFull, "disk full: the database cannot write; free space on its disk and retry")
	case pgerr.ClassUnavailable:
		return New(Unavailable, "database unavailable; retry later")
	}
	return New(Internal, "internal error")
}
