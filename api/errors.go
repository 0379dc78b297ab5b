package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/lograte"
)

// Error is the body of every error response:
//
//	{"error":{"code":404,"message":"...","kind":"NOT_FOUND","details":{...}}}
//
// code is the HTTP status (the CXDB UI reads error.code and error.message);
// kind is the documented string code. Handlers and domain packages return
// *fault.Error values; errorHandler turns them into this body by
// internal/fault's table.
type Error struct {
	Status  int            `json:"code"`
	Message string         `json:"message"`
	Kind    string         `json:"kind"`
	Details map[string]any `json:"details,omitempty"`
}

// errorBody wraps Error in the {"error": ...} envelope.
type errorBody struct {
	Error *Error `json:"error"`
}

// StatusClientClosed is the status of a request whose client went away
// before it was answered (nginx's 499, fault.ClientClosed): the access log
// and the request metrics say it, nobody receives it. It is not a server
// error.
const StatusClientClosed = 499

// bodyOf is the body that answers e: the status and kind its kind has in
// internal/fault's table, its message for the client and its details.
func bodyOf(e *fault.Error) *Error {
	return &Error{Status: e.Kind.Status(), Message: e.ClientMessage(), Kind: e.Kind.String(), Details: e.Details}
}

// describe is err as the error log says it: with the status and kind it
// was answered with, e.g. "503 UNAVAILABLE: not ready: ...".
func (e *Error) describe(err error) string {
	return fmt.Sprintf("%d %s: %v", e.Status, e.Kind, err)
}

// notReady is /healthz's 503 before it first answered ok: the server is
// not ready yet, which is no fault (logged at info).
type notReady struct{ err *fault.Error }

func (e notReady) Error() string { return e.err.Error() }
func (e notReady) Unwrap() error { return e.err }

// ErrorMapper gives a domain error that is no *fault.Error its kind, as a
// *fault.Error; it returns nil for errors it does not know. Route groups
// register theirs (their MapError method, Options.ErrorMappers).
type ErrorMapper func(error) *fault.Error

// retryAfterSeconds is the Retry-After of a 503: Postgres restarts and
// reconnects take about this long.
const retryAfterSeconds = "1"

// errorHandler renders every error the same way; it is the one place where
// errors become HTTP statuses, by internal/fault's table (toBody). Server
// errors are logged at ERROR once per status, kind and interval (errLog),
// whatever their rate: the request metrics count each.
func errorHandler(log *slog.Logger, errLog *lograte.Limiter, mappers []ErrorMapper) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		apiErr := toBody(err, mappers)
		req := c.Request()
		switch {
		case fault.KindOf(err) == fault.QuotaExceeded:
			// The tenant's condition, not a fault of the server.
			log.Debug("request over the storage quota", "method", req.Method, "path", c.Path(), "err", err)
		case apiErr.Status >= 500 && clientClosed(req):
			// It failed because the client left (a cancelled query, a
			// wait cut short): not a fault of the server, and there is
			// nobody to tell.
			log.Info("http client closed request", "method", req.Method, "path", c.Path(),
				"status", StatusClientClosed, "peer", req.RemoteAddr, "err", err)
			apiErr = bodyOf(fault.New(fault.ClientClosed, "the client closed the connection before the answer"))
		case errors.As(err, new(notReady)):
			// A probe asking before the server was ever ready: nothing
			// failed yet.
			errLog.Log(context.Background(), slog.LevelInfo, lograte.Key{Surface: "http (starting)", Status: apiErr.Status, Kind: apiErr.Kind},
				"not ready yet", "path", c.Path(), "err", apiErr.describe(err))
		case apiErr.Status >= 500:
			errLog.Log(context.Background(), slog.LevelError, lograte.Key{Surface: "http", Status: apiErr.Status, Kind: apiErr.Kind},
				"request failed", "method", req.Method, "path", c.Path(), "err", apiErr.describe(err))
		}
		if apiErr.Status == http.StatusServiceUnavailable {
			c.Response().Header().Set("Retry-After", retryAfterSeconds)
		}
		if werr := c.JSON(apiErr.Status, errorBody{apiErr}); werr != nil {
			log.Debug("write error response", "err", werr)
		}
	}
}

// clientClosed reports whether r's client went away: net/http cancels a
// request's context (with no cause of its own) when its connection
// closes. errorHandler asks only of server errors: net/http also cancels
// it when a read fails on the server's own deadline, and a body cut for
// arriving too slowly is the 408 it was. Deadlines the server sets on the
// work (the health check's, a query's) end contexts derived from the
// request's, with context.DeadlineExceeded, and stay errors.
func clientClosed(r *http.Request) bool {
	ctx := r.Context()
	return ctx.Err() == context.Canceled && context.Cause(ctx) == context.Canceled
}

// toBody is the body that answers err: a *fault.Error's by its kind; the
// HTTP framework's by its status; a domain error a mapper knows by the
// kind the mapper gives it; else, by fault.From, a Postgres error by
// internal/pgerr's classes (a full disk 507 DISK_FULL, Postgres
// unavailable 503), anything else 500.
func toBody(err error, mappers []ErrorMapper) *Error {
	var fe *fault.Error
	if errors.As(err, &fe) {
		return bodyOf(fe)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return fromEchoError(he)
	}
	for _, m := range mappers {
		if e := m(err); e != nil {
			return bodyOf(e)
		}
	}
	return bodyOf(fault.From(err))
}

// ErrorOf is the body the API answers err with when no route group's
// mapper claims it.
func ErrorOf(err error) *Error { return toBody(err, nil) }

// fromEchoError is the body of an error of the HTTP framework: the kind
// of its status, or, for a status no kind has, the status's text.
func fromEchoError(he *echo.HTTPError) *Error {
	msg := http.StatusText(he.Code)
	switch he.Code {
	case http.StatusNotFound:
		msg = "no such route"
	case http.StatusRequestEntityTooLarge:
		msg = "request body is larger than the configured limit"
	default:
		if s, ok := he.Message.(string); ok {
			msg = s
		}
	}
	kind, ok := fault.KindOfStatus(he.Code)
	if !ok {
		return &Error{Status: he.Code, Message: msg, Kind: http.StatusText(he.Code)}
	}
	return bodyOf(fault.New(kind, "%s", msg))
}
