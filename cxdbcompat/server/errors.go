package server

import (
	"context"
	"errors"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/internal/pgerr"
	"github.com/cardboxhq/cardbox/store"
)

// protocolError is an error the server itself raises, with its code.
type protocolError struct {
	code uint32
	kind string
	msg  string
}

func (e *protocolError) Error() string { return e.msg }

// storeCodes maps store error kinds to ERROR-frame codes.
var storeCodes = map[store.Kind]struct {
	code uint32
	kind string
}{
	store.KindInvalid:       {400, "BAD_REQUEST"},
	store.KindNotFound:      {404, "NOT_FOUND"},
	store.KindConflict:      {409, "CONFLICT"},
	store.KindUnprocessable: {422, "UNPROCESSABLE"},
	store.KindUnavailable:   {503, "UNAVAILABLE"},
	store.KindDiskFull:      {507, "DISK_FULL"},
	store.KindQuotaExceeded: {507, "QUOTA_EXCEEDED"},
	store.KindHeadMoved:     {409, "HEAD_MOVED"},
	store.KindInternal:      {500, "INTERNAL"},
}

// toErrorResponse is the one place where errors become ERROR-frame codes:
// malformed payloads 400, unknown things 404, bytes that contradict the
// declared hash or length 409, unknown message types and unsupported values
// 422, an unreachable database 503, a full disk (the data directory's or
// Postgres's) 507 DISK_FULL, a write over
// the tenant's storage quota 507 QUOTA_EXCEEDED, anything else 500 (its
// cause is logged, not sent).
func toErrorResponse(err error) cxdbcompat.ErrorResponse {
	var pe *protocolError
	switch {
	case errors.As(err, &pe):
		return cxdbcompat.ErrorResponse{Code: pe.code, Kind: pe.kind, Message: pe.msg}
	case errors.Is(err, cxdbcompat.ErrMalformed):
		return cxdbcompat.ErrorResponse{Code: 400, Kind: "BAD_REQUEST", Message: err.Error()}
	case errors.Is(err, cxdbcompat.ErrUnknownMessage):
		return cxdbcompat.ErrorResponse{Code: 422, Kind: "UNKNOWN_MESSAGE", Message: err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return cxdbcompat.ErrorResponse{Code: 503, Kind: "UNAVAILABLE", Message: "request cancelled"}
	}
	var se *store.Error
	if !errors.As(err, &se) {
		// Postgres's own errors come as store errors, whose kind the
		// store takes from internal/pgerr; one that reached here
		// unwrapped is answered by the same classes.
		switch pgerr.Classify(err) {
		case pgerr.ClassDiskFull:
			return cxdbcompat.ErrorResponse{Code: 507, Kind: "DISK_FULL", Message: "disk full: the database cannot write; free space on its disk and retry"}
		case pgerr.ClassUnavailable:
			return cxdbcompat.ErrorResponse{Code: 503, Kind: "UNAVAILABLE", Message: "database unavailable; retry later"}
		}
		return cxdbcompat.ErrorResponse{Code: 500, Kind: "INTERNAL", Message: "internal error"}
	}
	c := storeCodes[se.Kind]
	msg := se.Error()
	if se.Kind == store.KindInternal {
		msg = se.Msg // the cause may name files; it is logged instead
	}
	return cxdbcompat.ErrorResponse{Code: c.code, Kind: c.kind, Message: msg, Details: se.Details}
}

// errorFrame encodes err as an ERROR (255) frame for reqID.
func errorFrame(reqID uint64, err error) []byte {
	resp := toErrorResponse(err)
	return frame(cxdbcompat.MsgError, reqID, resp.AppendTo)
}
