package api

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// HTTPMetrics counts requests by route and status and times them. Register
// it with the registry served at /metrics (NewRegistry's extra
// collectors) and pass it in Options.
type HTTPMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewHTTPMetrics returns unregistered request metrics.
func NewHTTPMetrics() *HTTPMetrics {
	return &HTTPMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardbox_http_requests_total", Help: "HTTP requests answered, by route and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cardbox_http_request_duration_seconds", Help: "Time to answer HTTP requests, by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}, []string{"method", "route"}),
	}
}

// Requests is the counter of one method, route and status.
func (m *HTTPMetrics) Requests(method, route, status string) prometheus.Counter {
	return m.requests.WithLabelValues(method, route, status)
}

// Describe implements prometheus.Collector.
func (m *HTTPMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.duration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *HTTPMetrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.duration.Collect(ch)
}

// observe records each request in the metrics (if any) and the access log
// (if on): method, route, status, bytes, duration and peer at info; a 4xx
// also at debug with its error, so a client's mistakes can be traced
// without logging every body. A request whose client went away is status
// 499 (StatusClientClosed; errorHandler logs it at info).
func observe(log *slog.Logger, m *HTTPMetrics, accessLog bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err) // render now, so the status is known
			}
			route, status := c.Path(), c.Response().Status
			if route == "" {
				route = "unmatched" // bounded label: never the raw path
			}
			elapsed := time.Since(start)
			req := c.Request()
			if m != nil {
				m.requests.WithLabelValues(req.Method, route, strconv.Itoa(status)).Inc()
				m.duration.WithLabelValues(req.Method, route).Observe(elapsed.Seconds())
			}
			if accessLog {
				log.Info("http request", "method", req.Method, "route", route, "status", status,
					"bytes", c.Response().Size, "duration", elapsed, "peer", req.RemoteAddr)
			}
			if status >= 400 && status < 500 && status != StatusClientClosed && err != nil {
				log.Debug("http client error", "method", req.Method, "path", req.URL.Path, "status", status,
					"peer", req.RemoteAddr, "err", err)
			}
			return nil
		}
	}
}
