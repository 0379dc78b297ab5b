// Package api is the core of cardbox's HTTP listener: the server, its
// middleware (authentication, rate limits, deadlines, body limits, the
// access log and request metrics), health and the one error handler. The
// route groups live in the packages beside it (cxdbhttp, cardboxhttp,
// adminhttp), each importing this one; the daemon passes them in
// Options.Routes. Handlers are thin: they decode, call a domain package
// and encode; errors become HTTP statuses in one place (errors.go).
package api

import (
	"context"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof on DefaultServeMux, served only with Options.Pprof
	"strconv"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/lograte"
)

// HealthChecker reports whether the server can serve: Postgres answers and
// the data files are open.
type HealthChecker interface {
	Healthy(ctx context.Context) error
}

// Routes registers a group of handlers on the server.
type Routes interface {
	Register(e *echo.Echo)
}

// Options configure the HTTP API.
type Options struct {
	Health HealthChecker
	// Routes are the domain route groups (CardBox, ...).
	Routes []Routes
	// ErrorMappers give domain errors that are no *fault.Error their kind.
	ErrorMappers []ErrorMapper
	// BodyLimit caps request bodies in bytes; larger ones get 413.
	BodyLimit int64
	// Metrics, if set, is served at GET /metrics (Prometheus text format).
	Metrics prometheus.Gatherer
	// Deadlines bound slow request bodies and responses; DefaultDeadlines
	// when zero.
	Deadlines Deadlines
	// HTTPMetrics, if set, counts and times requests by route and status.
	HTTPMetrics *HTTPMetrics
	// AccessLog logs every request at info.
	AccessLog bool
	// Auth, if set, is hosted mode: every route but /healthz wants a
	// bearer key, and requests act for the key's tenant (see authenticate).
	// Nil is dev mode: no keys, the default tenant.
	Auth Authenticator
	// Limit, if set with Auth, is asked before each authenticated request
	// whether its tenant may make one now; a refusal is 429 with
	// Retry-After (ratelimit.Limiter.Allow).
	Limit func(ctx context.Context, tenant string) (bool, time.Duration)
	// Pprof serves Go's profiler under /debug/pprof/ (off by default: it
	// exposes internals).
	Pprof  bool
	Logger *slog.Logger
	// ErrorLogInterval is how long server errors of one status and kind
	// are counted, after one is logged, before their count is logged
	// (lograte.DefaultInterval, 5 s, when zero).
	ErrorLogInterval time.Duration
}

// DefaultBodyLimit is the request body cap when Options.BodyLimit is 0.
const DefaultBodyLimit = 8 << 20

// Handler is the HTTP API.
type Handler struct {
	*echo.Echo
	arriving *bodySet
	errLog   *lograte.Limiter // server errors, logged once per kind and interval
}

// FlushErrorLog logs the counts of server errors not logged yet (they are
// logged once per kind and interval); call it once the server is shut
// down. Later errors are logged one by one.
func (h *Handler) FlushErrorLog() { h.errLog.Stop() }

// CutArrivingBodies ends every request whose body is still arriving, and
// every later one (their clients get 408 or a closed connection): at
// shutdown, requests that are executing finish, requests still being
// received do not hold the server.
func (h *Handler) CutArrivingBodies() { h.arriving.cutAll() }

// New builds the HTTP handler.
func New(opts Options) *Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	limit := opts.BodyLimit
	if limit <= 0 {
		limit = DefaultBodyLimit
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	errLog := lograte.New(log, lograte.Options{Interval: opts.ErrorLogInterval})
	e.HTTPErrorHandler = errorHandler(log, errLog, errorMappers(opts))
	deadlines := opts.Deadlines
	if deadlines == (Deadlines{}) {
		deadlines = DefaultDeadlines
	}
	e.Use(observe(log, opts.HTTPMetrics, opts.AccessLog))
	e.Use(middleware.Recover())
	arriving := &bodySet{}
	e.Use(withDeadlines(deadlines, arriving))
	e.Use(middleware.BodyLimit(strconv.FormatInt(limit, 10)))
	if opts.Auth != nil {
		e.Use(authenticate(opts.Auth, opts.Limit))
	}
	e.GET("/healthz", healthz(opts.Health))
	if opts.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(opts.Metrics, promhttp.HandlerOpts{})))
	}
	if opts.Pprof {
		e.Any("/debug/pprof/*", echo.WrapHandler(http.DefaultServeMux))
	}
	for _, r := range opts.Routes {
		r.Register(e)
	}
	return &Handler{Echo: e, arriving: arriving, errLog: errLog}
}

// healthTimeout bounds the health check of /healthz: a stalled Postgres is
// a 503, not a hang. It leaves room within 2 s for the rest of the answer,
// so that a probe with a 2 s timeout always hears one.
const healthTimeout = 1500 * time.Millisecond

// healthz answers 200 "ok" (text/plain, as CXDB clients expect) when the
// store is healthy, "ok (degraded: ...)" when it serves but lost
// something, else 503 with the reason, within healthTimeout and some
// milliseconds.
func healthz(h HealthChecker) echo.HandlerFunc {
	var ready atomic.Bool // it answered ok once: a 503 now is a fault
	return func(c echo.Context) error {
		if h == nil {
			return c.String(http.StatusOK, "ok")
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), healthTimeout)
		defer cancel()
		if err := h.Healthy(ctx); err != nil {
			e := fault.New(fault.Unavailable, "not ready: %v", err)
			if !ready.Load() {
				return notReady{e}
			}
			return e
		}
		ready.Store(true)
		if d, ok := h.(interface{ Degraded() string }); ok && d.Degraded() != "" {
			return c.String(http.StatusOK, "ok (degraded: "+d.Degraded()+")")
		}
		return c.String(http.StatusOK, "ok")
	}
}

// errorMappers returns Options.ErrorMappers plus the MapError method of
// every route group that has one.
func errorMappers(opts Options) []ErrorMapper {
	mappers := append([]ErrorMapper(nil), opts.ErrorMappers...)
	for _, r := range opts.Routes {
		if m, ok := r.(interface{ MapError(error) *fault.Error }); ok {
			mappers = append(mappers, m.MapError)
		}
	}
	return mappers
}
