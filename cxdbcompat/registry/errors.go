package registry

import (
	"errors"
	"fmt"

	"github.com/cardboxhq/cardbox/internal/fault"
)

// Error kinds. Every error of Parse and Apply wraps exactly one of them, so
// callers can branch with errors.Is.
var (
	// ErrMalformed: the bundle is not a valid bundle (HTTP 422).
	ErrMalformed = errors.New("malformed registry bundle")
	// ErrConflict: the bundle is valid but breaks an evolution rule or
	// republishes a bundle id with other content (HTTP 409).
	ErrConflict = errors.New("registry conflict")
)

// Error is the error type of Parse and Apply. Its fields other than Kind
// and Message are set only when they apply; Details gives them as a
// JSON-ready object.
type Error struct {
	Kind     error  // ErrMalformed or ErrConflict
	Message  string // the reference's wording where it has one
	Path     string // JSON path of the offending value, for malformed bundles
	BundleID string
	TypeID   string
	Version  *uint32 // the offending type version
	Latest   *uint32 // the type's highest version, for a version going back
	Tag      *uint64
	EnumID   string
}

// Error returns the message alone: it is what the HTTP body shows.
func (e *Error) Error() string { return e.Message }

// Unwrap exposes the kind to errors.Is, and e as a *fault.Error to the
// surfaces: a malformed bundle is fault.Unprocessable, a conflict
// fault.Conflict, with the message alone and the set fields as details.
func (e *Error) Unwrap() []error {
	kind := fault.Unprocessable
	if e.Kind == ErrConflict {
		kind = fault.Conflict
	}
	return []error{e.Kind, &fault.Error{Kind: kind, Message: e.Message, Details: e.Details()}}
}

// Details returns the set fields of e, for the `details` object of an HTTP
// error body; nil when none is set.
func (e *Error) Details() map[string]any {
	d := map[string]any{}
	put := func(k, v string) {
		if v != "" {
			d[k] = v
		}
	}
	put("path", e.Path)
	put("bundle_id", e.BundleID)
	put("type_id", e.TypeID)
	put("enum_id", e.EnumID)
	if e.Version != nil {
		d["version"] = *e.Version
	}
	if e.Latest != nil {
		d["latest_version"] = *e.Latest
	}
	if e.Tag != nil {
		d["tag"] = *e.Tag
	}
	if len(d) == 0 {
		return nil
	}
	return d
}

// malformed builds an ErrMalformed error; the message says where.
func malformed(path, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	return &Error{Kind: ErrMalformed, Message: "invalid json: " + msg, Path: path}
}

// invalid builds an ErrMalformed error whose message is the reference's
// own wording rather than an "invalid json" one.
func invalid(path, msg string) *Error {
	return &Error{Kind: ErrMalformed, Message: msg, Path: path}
}

// conflict builds an ErrConflict error for a type.
func conflict(typeID string, msg string) *Error {
	return &Error{Kind: ErrConflict, Message: msg, TypeID: typeID}
}

func u32p(v uint32) *uint32 { return &v }
func u64p(v uint64) *uint64 { return &v }
