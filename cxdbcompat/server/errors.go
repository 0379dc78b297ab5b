package server

import (
	"context"
	"errors"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/internal/fault"
)

// toErrorResponse is the one place where errors become ERROR-frame codes,
// by internal/fault's table: malformed payloads 400 BAD_REQUEST, unknown
// message types 422 UNKNOWN_MESSAGE, a request cut short by its context
// 503 UNAVAILABLE, and every *fault.Error (the store's, the server's own)
// by its kind; Postgres's own errors by internal/pgerr's classes, anything
// else 500 (its cause is logged, not sent).
func toErrorResponse(err error) cxdbcompat.ErrorResponse {
	var e *fault.Error
	switch {
	case errors.Is(err, cxdbcompat.ErrMalformed):
		e = fault.New(fault.Invalid, "%s", err)
	case errors.Is(err, cxdbcompat.ErrUnknownMessage):
		e = fault.New(fault.UnknownMessage, "%s", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		e = fault.New(fault.Unavailable, "request cancelled")
	default:
		e = fault.From(err)
	}
	return cxdbcompat.ErrorResponse{Code: e.Kind.Code(), Kind: e.Kind.String(), Message: e.ClientMessage(), Details: e.Details}
}

// errorFrame encodes err as an ERROR (255) frame for reqID.
func errorFrame(reqID uint64, err error) []byte {
	resp := toErrorResponse(err)
	return frame(cxdbcompat.MsgError, reqID, resp.AppendTo)
}
