package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/internal/lograte"
	"github.com/cardboxhq/cardbox/internal/pgerr"
	"github.com/cardboxhq/cardbox/store"
)

// Error is the body of every error response:
//
//	{"error":{"code":404,"message":"...","kind":"NOT_FOUND","details":{...}}}
//
// code is the HTTP status (the CXDB UI reads error.code and error.message);
// kind is the documented string code.
type Error struct {
	Status  int            `json:"code"`
	Message string         `json:"message"`
	Kind    string         `json:"kind"`
	Details map[string]any `json:"details,omitempty"`
	// startingUp marks /healthz's 503 before it first answered ok: the
	// server is not ready yet, which is no fault (logged at info).
	startingUp bool
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Kind, e.Message) }

// errorBody wraps Error in the {"error": ...} envelope.
type errorBody struct {
	Error *Error `json:"error"`
}

// Kinds of error, by HTTP status.
var kinds = map[int]string{
	http.StatusBadRequest:            "BAD_REQUEST",
	http.StatusUnauthorized:          "UNAUTHORIZED",
	http.StatusForbidden:             "FORBIDDEN",
	http.StatusNotFound:              "NOT_FOUND",
	http.StatusMethodNotAllowed:      "METHOD_NOT_ALLOWED",
	http.StatusRequestTimeout:        "REQUEST_TIMEOUT",
	http.StatusConflict:              "CONFLICT",
	http.StatusRequestEntityTooLarge: "PAYLOAD_TOO_LARGE",
	http.StatusUnsupportedMediaType:  "UNSUPPORTED_MEDIA_TYPE",
	http.StatusTooManyRequests:       "RATE_LIMITED",
	http.StatusUnprocessableEntity:   "UNPROCESSABLE",
	http.StatusServiceUnavailable:    "UNAVAILABLE",
	http.StatusInsufficientStorage:   "DISK_FULL",
	http.StatusInternalServerError:   "INTERNAL",
	StatusClientClosed:               "CLIENT_CLOSED",
}

// StatusClientClosed is the status of a request whose client went away
// before it was answered (nginx's 499): the access log and the request
// metrics say it, nobody receives it. It is not a server error.
const StatusClientClosed = 499

// NewError builds an Error with the kind that goes with status.
func NewError(status int, format string, args ...any) *Error {
	kind, ok := kinds[status]
	if !ok {
		kind = http.StatusText(status)
	}
	return &Error{Status: status, Message: fmt.Sprintf(format, args...), Kind: kind}
}

// storeStatus is the HTTP status of each turn store error kind.
var storeStatus = map[store.Kind]int{
	store.KindInvalid:       http.StatusBadRequest,
	store.KindNotFound:      http.StatusNotFound,
	store.KindConflict:      http.StatusConflict,
	store.KindUnprocessable: http.StatusUnprocessableEntity,
	store.KindUnavailable:   http.StatusServiceUnavailable,
	store.KindDiskFull:      http.StatusInsufficientStorage,
	store.KindQuotaExceeded: http.StatusInsufficientStorage,
	store.KindHeadMoved:     http.StatusConflict,
	store.KindInternal:      http.StatusInternalServerError,
}

// storeKinds are the kinds of store errors whose string code is not the
// one of their status: a tenant over its quota is told so, not that the
// disk is full; a conditional append that lost the head, not merely of a
// conflict.
var storeKinds = map[store.Kind]string{
	store.KindQuotaExceeded: store.KindQuotaExceeded.String(),
	store.KindHeadMoved:     store.KindHeadMoved.String(),
}

// StoreErrors maps turn store errors: the kind gives the status, the
// message and details go to the client, except an internal error's cause,
// which is logged. It returns nil for other errors.
func StoreErrors(err error) *Error {
	var se *store.Error
	if !errors.As(err, &se) {
		return nil
	}
	status := storeStatus[se.Kind]
	if se.Kind == store.KindInternal {
		return NewError(status, "%s", se.Msg)
	}
	e := NewError(status, "%s", se.Error())
	e.Details = se.Details
	if kind, ok := storeKinds[se.Kind]; ok {
		e.Kind = kind
	}
	return e
}

// ErrorMapper turns a domain error into an API error; it returns nil for
// errors it does not know. Domain packages register theirs in Options.
type ErrorMapper func(error) *Error

// retryAfterSeconds is the Retry-After of a 503: Postgres restarts and
// reconnects take about this long.
const retryAfterSeconds = "1"

// errorHandler renders every error the same way; it is the one place where
// errors become HTTP statuses. Server errors are logged at ERROR once per
// status, kind and interval (errLog), whatever their rate: the request
// metrics count each.
func errorHandler(log *slog.Logger, errLog *lograte.Limiter, mappers []ErrorMapper) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		apiErr := toAPIError(err, mappers)
		req := c.Request()
		switch {
		case store.KindOf(err) == store.KindQuotaExceeded:
			// The tenant's condition, not a fault of the server.
			log.Debug("request over the storage quota", "method", req.Method, "path", c.Path(), "err", err)
		case apiErr.Status >= 500 && clientClosed(req):
			// It failed because the client left (a cancelled query, a
			// wait cut short): not a fault of the server, and there is
			// nobody to tell.
			log.Info("http client closed request", "method", req.Method, "path", c.Path(),
				"status", StatusClientClosed, "peer", req.RemoteAddr, "err", err)
			apiErr = NewError(StatusClientClosed, "the client closed the connection before the answer")
		case apiErr.startingUp:
			// A probe asking before the server was ever ready: nothing
			// failed yet.
			errLog.Log(context.Background(), slog.LevelInfo, lograte.Key{Surface: "http (starting)", Status: apiErr.Status, Kind: apiErr.Kind},
				"not ready yet", "path", c.Path(), "err", err)
		case apiErr.Status >= 500:
			errLog.Log(context.Background(), slog.LevelError, lograte.Key{Surface: "http", Status: apiErr.Status, Kind: apiErr.Kind},
				"request failed", "method", req.Method, "path", c.Path(), "err", err)
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

func toAPIError(err error, mappers []ErrorMapper) *Error {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return fromEchoError(he)
	}
	for _, m := range mappers {
		if e := m(err); e != nil {
			return e
		}
	}
	if e := PostgresErrors(err); e != nil {
		return e
	}
	return NewError(http.StatusInternalServerError, "internal error")
}

// PostgresErrors maps the Postgres errors no domain mapper claimed (the
// CardBox routes', the administration's) as internal/pgerr classifies
// them: a full disk 507 DISK_FULL, Postgres unavailable 503. It returns
// nil for other errors. The turn store's come as store errors, of kind
// KindDiskFull and KindUnavailable by the same classes (StoreErrors).
func PostgresErrors(err error) *Error {
	switch pgerr.Classify(err) {
	case pgerr.ClassDiskFull:
		return NewError(http.StatusInsufficientStorage, "disk full: the database cannot write; free space on its disk and retry")
	case pgerr.ClassUnavailable:
		return NewError(http.StatusServiceUnavailable, "database unavailable; retry later")
	}
	return nil
}

func fromEchoError(he *echo.HTTPError) *Error {
	switch he.Code {
	case http.StatusNotFound:
		return NewError(he.Code, "no such route")
	case http.StatusRequestEntityTooLarge:
		return NewError(he.Code, "request body is larger than the configured limit")
	}
	msg := http.StatusText(he.Code)
	if s, ok := he.Message.(string); ok {
		msg = s
	}
	return NewError(he.Code, "%s", msg)
}

// With adds a detail to the error and returns it.
func (e *Error) With(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}
