package store

import (
	"errors"
	"fmt"

	"github.com/cardboxhq/cardbox/internal/pgerr"
)

// Kind classifies a store error; each surface maps kinds to its own codes in
// one place (the binary protocol's ERROR frame, HTTP statuses).
type Kind int

// Kinds of store errors.
const (
	KindInternal      Kind = iota // a bug or an I/O failure
	KindInvalid                   // malformed input
	KindNotFound                  // an unknown context, turn, parent or blob
	KindConflict                  // the bytes contradict what the client declared (hash, length), or an idempotency key is reused for another append
	KindUnprocessable             // well-formed but unsupported (compression, sizes)
	KindUnavailable               // the database is unreachable or the store is shutting down
	KindDiskFull                  // the data directory's file system, or Postgres's, is full; writes resume when space is freed
	KindQuotaExceeded             // the write would take the tenant over its storage quota (not a full disk)
	KindHeadMoved                 // a conditional append found the context's head elsewhere than the parent it named
)

// Kinds lists every Kind, for the tests that check each surface maps them
// all.
var Kinds = []Kind{KindInternal, KindInvalid, KindNotFound, KindConflict, KindUnprocessable, KindUnavailable, KindDiskFull, KindQuotaExceeded, KindHeadMoved}

var kindNames = [...]string{"INTERNAL", "INVALID", "NOT_FOUND", "CONFLICT", "UNPROCESSABLE", "UNAVAILABLE", "DISK_FULL", "QUOTA_EXCEEDED", "HEAD_MOVED"}

// String returns the kind's protocol name, e.g. "NOT_FOUND".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Error is a store failure with its kind and a message for the client.
type Error struct {
	Kind Kind
	Msg  string
	Err  error // cause, if any; not shown to clients for internal errors
	// Details are facts for the client beside the message, e.g. the turn
	// a reused idempotency key names; nil for most errors.
	Details map[string]any
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// KindOf reports the kind of err: KindInternal unless err is or wraps an
// *Error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

func errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// wrapf wraps err, the cause, as an error of kind. It is where a
// Postgres error takes its kind in the store: a cause pgerr classifies as
// a full disk (SQLSTATE 53100, an ERROR or the PANIC of a WAL write) is
// KindDiskFull whatever kind the caller named, so that every path (a
// group's statement or COMMIT, a lookup, a registry write) answers it
// 507 DISK_FULL, as a full data directory is; the other classes keep the
// caller's kind.
func wrapf(kind Kind, err error, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if pgerr.DiskFull(err) {
		kind = KindDiskFull
		msg += ": Postgres's disk is full; free space on it and retry"
	}
	return &Error{Kind: kind, Msg: msg, Err: err}
}

// Wrap is wrapf for the packages beside the store that query Postgres on
// a request's path (key and quota lookups): their failures take their
// kind as the store's do.
func Wrap(kind Kind, err error, msg string) *Error { return wrapf(kind, err, "%s", msg) }

// ErrClosed is returned by calls made after Close.
var ErrClosed = errorf(KindUnavailable, "store is shutting down")
