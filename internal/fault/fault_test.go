package fault

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Every kind has an HTTP status, a binary code and a name, and only
// internal errors are server faults that are not the client's or the
// environment's (500).
func TestEveryKindHasAWireForm(t *testing.T) {
	names := map[string]Kind{}
	for _, k := range Kinds {
		if k.Status() < 400 || k.Code() == 0 || k.String() == "" {
			t.Errorf("kind %d: status %d, code %d, name %q", int(k), k.Status(), k.Code(), k.String())
		}
		if uint32(k.Status()) != k.Code() {
			t.Errorf("%v: HTTP %d but ERROR %d: the binary codes are HTTP-style", k, k.Status(), k.Code())
		}
		if (k == Internal) != (k.Status() == http.StatusInternalServerError) {
			t.Errorf("%v is status %d: only internal errors are 500", k, k.Status())
		}
		if other, dup := names[k.String()]; dup {
			t.Errorf("%v and %v share the name %s", k, other, k.String())
		}
		names[k.String()] = k
	}
}

// The names are the wire's: clients branch on them, so they never change.
func TestWireNames(t *testing.T) {
	for _, tt := range []struct {
		kind   Kind
		status int
		name   string
	}{
		{Internal, 500, "INTERNAL"},
		{Invalid, 400, "BAD_REQUEST"},
		{Unauthorized, 401, "UNAUTHORIZED"},
		{Forbidden, 403, "FORBIDDEN"},
		{NotFound, 404, "NOT_FOUND"},
		{MethodNotAllowed, 405, "METHOD_NOT_ALLOWED"},
		{RequestTimeout, 408, "REQUEST_TIMEOUT"},
		{Conflict, 409, "CONFLICT"},
		{TooLarge, 413, "PAYLOAD_TOO_LARGE"},
		{FrameTooLarge, 413, "FRAME_TOO_LARGE"},
		{UnsupportedMediaType, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{Unprocessable, 422, "UNPROCESSABLE"},
		{UnknownMessage, 422, "UNKNOWN_MESSAGE"},
		{RateLimited, 429, "RATE_LIMITED"},
		{ClientClosed, 499, "CLIENT_CLOSED"},
		{Unavailable, 503, "UNAVAILABLE"},
		{TooManyConnections, 503, "TOO_MANY_CONNECTIONS"},
		{DiskFull, 507, "DISK_FULL"},
		{QuotaExceeded, 507, "QUOTA_EXCEEDED"},
		{HeadMoved, 409, "HEAD_MOVED"},
	} {
		if tt.kind.Status() != tt.status || tt.kind.String() != tt.name {
			t.Errorf("kind %d: %d %s, want %d %s", int(tt.kind), tt.kind.Status(), tt.kind, tt.status, tt.name)
		}
	}
	if got := Kind(len(Kinds)).String(); got != fmt.Sprintf("Kind(%d)", len(Kinds)) {
		t.Errorf("unknown kind: %q", got)
	}
}

func TestKindOfStatus(t *testing.T) {
	for _, tt := range []struct {
		status int
		kind   Kind
		ok     bool
	}{
		{400, Invalid, true}, {413, TooLarge, true}, {422, Unprocessable, true},
		{503, Unavailable, true}, {507, DiskFull, true}, {418, Internal, false},
	} {
		if k, ok := KindOfStatus(tt.status); k != tt.kind || ok != tt.ok {
			t.Errorf("KindOfStatus(%d) = %v, %v; want %v, %v", tt.status, k, ok, tt.kind, tt.ok)
		}
	}
}

func TestErrorText(t *testing.T) {
	cause := errors.New("open /data/x: no such file")
	for _, tt := range []struct {
		err          *Error
		text, client string
	}{
		{New(NotFound, "turn %d not found", 7), "turn 7 not found", "turn 7 not found"},
		{Wrap(Unprocessable, cause, "read"), "read: open /data/x: no such file", "read: open /data/x: no such file"},
		{Wrap(Internal, cause, "read"), "read: open /data/x: no such file", "read"},
	} {
		if tt.err.Error() != tt.text || tt.err.ClientMessage() != tt.client {
			t.Errorf("%q, %q; want %q, %q", tt.err.Error(), tt.err.ClientMessage(), tt.text, tt.client)
		}
	}
	if e := New(Invalid, "m").With("parameter", "limit"); e.Details["parameter"] != "limit" {
		t.Errorf("details: %v", e.Details)
	}
}

func TestWrapAndKindOf(t *testing.T) {
	pg := func(severity, code string) error { return &pgconn.PgError{Severity: severity, Code: code} }
	for _, tt := range []struct {
		name string
		err  error
		want Kind
	}{
		{"plain error", errors.New("x"), Internal},
		{"wrapped Error", fmt.Errorf("ctx: %w", New(Conflict, "m")), Conflict},
		{"caller's kind", Wrap(Unavailable, pg("ERROR", "57P01"), "look up"), Unavailable},
		{"Postgres disk full", Wrap(Unavailable, pg("ERROR", "53100"), "look up"), DiskFull},
		{"Postgres disk full in a PANIC", Wrap(Internal, pg("PANIC", "53100"), "commit"), DiskFull},
	} {
		if got := KindOf(tt.err); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFrom(t *testing.T) {
	pg := func(code string) error {
		return fmt.Errorf("query: %w", &pgconn.PgError{Severity: "ERROR", Code: code})
	}
	own := New(NotFound, "m")
	for _, tt := range []struct {
		name string
		err  error
		kind Kind
		msg  string
	}{
		{"an Error", fmt.Errorf("load: %w", own), NotFound, "m"},
		{"Postgres disk full", pg("53100"), DiskFull, "disk full: the database cannot write; free space on its disk and retry"},
		{"Postgres unavailable", pg("57P01"), Unavailable, "database unavailable; retry later"},
		{"anything else", errors.New("open /secret"), Internal, "internal error"},
	} {
		if e := From(tt.err); e.Kind != tt.kind || e.ClientMessage() != tt.msg {
			t.Errorf("%s: %v %q, want %v %q", tt.name, e.Kind, e.ClientMessage(), tt.kind, tt.msg)
		}
	}
}
