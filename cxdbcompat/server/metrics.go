package server

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// metrics counts what the server does, for Prometheus (Server.Collector).
type metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	clientClosed prometheus.Counter
	// compressedRefused counts APPEND_TURNs whose zstd payload was
	// refused (undecodable, or inflating past its declared length).
	compressedRefused prometheus.Counter
	requestBytes      atomic.Int64 // charged to MaxInFlightBytes now
	replyBytes        atomic.Int64 // charged to MaxReplyBytes now
	framesWaiting     atomic.Int64 // frames waiting for room in MaxInFlightBytes now
	// Request handler goroutines: started, and running (busy or idle).
	handlersStarted, handlersRunning atomic.Int64
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardbox_binary_requests_total",
			Help: "Binary protocol requests answered, by message type and code (0: success, else the ERROR code).",
		}, []string{"type", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cardbox_binary_request_duration_seconds",
			Help: "Time to handle binary protocol requests (from decoding to the answer built), by message type.",
			// 100 µs to 6.5 s: an append waits for fdatasync and a commit.
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9),
		}, []string{"type"}),
		clientClosed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardbox_binary_client_closed_total",
			Help: "Binary protocol requests abandoned because the client closed its connection before their answer (not in cardbox_binary_requests_total).",
		}),
		compressedRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardbox_binary_compressed_refused_total",
			Help: "APPEND_TURNs refused for their zstd payload: undecodable, or inflating past the length they declared (a zstd bomb).",
		}),
	}
}

// handled times a request of type t that started at start.
func (m *metrics) handled(t cxdbcompat.MsgType, start time.Time) {
	m.duration.WithLabelValues(typeLabel(t)).Observe(time.Since(start).Seconds())
}

// typeLabel is a message type's label: its name, or "unknown", so that
// what clients send cannot grow the label set.
func typeLabel(t cxdbcompat.MsgType) string {
	if name := t.String(); !strings.HasPrefix(name, "MsgType(") {
		return name
	}
	return "unknown"
}

// answered counts a request by its type and the answer's code.
func (m *metrics) answered(t cxdbcompat.MsgType, resp []byte) {
	code := "0"
	if len(resp) >= cxdbcompat.HeaderSize && cxdbcompat.MsgType(le16(resp[4:6])) == cxdbcompat.MsgError {
		if e, err := cxdbcompat.DecodeErrorResponse(resp[cxdbcompat.HeaderSize:]); err == nil {
			code = strconv.Itoa(int(e.Code))
		}
	}
	m.requests.WithLabelValues(typeLabel(t), code).Inc()
}

func le16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }

var (
	requestBytesDesc = prometheus.NewDesc("cardbox_binary_request_bytes_held",
		"Bytes of binary frames arriving or in progress charged to the request budget.", nil, nil)
	framesWaitingDesc = prometheus.NewDesc("cardbox_binary_frames_waiting_for_room",
		"Binary frames being read that wait for room in the request budget (--max-inflight-bytes or the tenant's share of it).", nil, nil)
	replyBytesDesc = prometheus.NewDesc("cardbox_binary_reply_bytes_held",
		"Bytes of large binary answers built and not yet written.", nil, nil)
	sessionsDesc = prometheus.NewDesc("cardbox_binary_sessions",
		"Binary protocol sessions open.", nil, nil)
	handlersDesc = prometheus.NewDesc("cardbox_binary_request_handlers",
		"Request handler goroutines of the open sessions, busy or idle.", nil, nil)
	handlersStartedDesc = prometheus.NewDesc("cardbox_binary_request_handlers_started_total",
		"Request handler goroutines started (a session reuses idle ones).", nil, nil)
)

// Collector returns the server's Prometheus collector: requests by type
// and code, their durations by type, requests abandoned by their clients,
// bytes held in flight, sessions open, request handlers.
func (s *Server) Collector() prometheus.Collector { return serverCollector{s} }

type serverCollector struct{ s *Server }

// Describe implements prometheus.Collector.
func (c serverCollector) Describe(ch chan<- *prometheus.Desc) {
	c.s.metrics.requests.Describe(ch)
	c.s.metrics.duration.Describe(ch)
	c.s.metrics.clientClosed.Describe(ch)
	c.s.metrics.compressedRefused.Describe(ch)
	ch <- requestBytesDesc
	ch <- framesWaitingDesc
	ch <- replyBytesDesc
	ch <- sessionsDesc
	ch <- handlersDesc
	ch <- handlersStartedDesc
}

// Collect implements prometheus.Collector.
func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.s.metrics
	m.requests.Collect(ch)
	m.duration.Collect(ch)
	m.clientClosed.Collect(ch)
	m.compressedRefused.Collect(ch)
	ch <- prometheus.MustNewConstMetric(requestBytesDesc, prometheus.GaugeValue, float64(m.requestBytes.Load()))
	ch <- prometheus.MustNewConstMetric(framesWaitingDesc, prometheus.GaugeValue, float64(m.framesWaiting.Load()))
	ch <- prometheus.MustNewConstMetric(replyBytesDesc, prometheus.GaugeValue, float64(m.replyBytes.Load()))
	ch <- prometheus.MustNewConstMetric(handlersDesc, prometheus.GaugeValue, float64(m.handlersRunning.Load()))
	ch <- prometheus.MustNewConstMetric(handlersStartedDesc, prometheus.CounterValue, float64(m.handlersStarted.Load()))
	c.s.mu.Lock()
	n := len(c.s.conns)
	c.s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n))
}
