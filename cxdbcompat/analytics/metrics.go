package analytics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a projected turn, as cardbox_analytics_projected_total's
// label "outcome" names them.
const (
	outcomeData = iota
	outcomeTooLarge
	outcomeUnknownType
	outcomeUndecodable
	outcomeUnreadable
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"data", SkipTooLarge, SkipUnknownType, SkipUndecodable, SkipUnreadable}

func outcomeOf(skipped string) int {
	for i, n := range outcomeNames {
		if i > 0 && n == skipped {
			return i
		}
	}
	return outcomeData
}

var (
	descLag = prometheus.NewDesc("cardbox_analytics_lag_seconds",
		"How long the oldest committed turn known to be without turn_data has waited (0: up to date).", nil, nil)
	descProjected = prometheus.NewDesc("cardbox_analytics_projected_total",
		"Turns written to turn_data since start, by outcome (data, or why it was skipped).", []string{"outcome"}, nil)
	descQueue = prometheus.NewDesc("cardbox_analytics_queue_length",
		"Committed turns waiting for the projector.", nil, nil)
	descDropped = prometheus.NewDesc("cardbox_analytics_queue_dropped_total",
		"Committed turns the full queue dropped (catch-up projects them from Postgres).", nil, nil)
	descCaughtUp = prometheus.NewDesc("cardbox_analytics_caught_up_total",
		"Turns projected by catch-up (found without turn_data in Postgres).", nil, nil)
	descReprojected = prometheus.NewDesc("cardbox_analytics_reprojected_total",
		"turn_data rows a backfill changed after a bundle was published.", nil, nil)
	descDelay = prometheus.NewDesc("cardbox_analytics_delay_seconds",
		"Time from a turn's commit to its turn_data row, per turn first written (its p99 is the lag's).", nil, nil)
	descFailures = prometheus.NewDesc("cardbox_analytics_failures_total",
		"Projector rounds that failed (Postgres unavailable) and were retried.", nil, nil)
	descTypeIDsLeftOut = prometheus.NewDesc("cardbox_analytics_type_ids_left_out_total",
		"Registered type ids a backfill left out because Postgres cannot store them (a NUL, invalid UTF-8).", nil, nil)
)

// Describe implements prometheus.Collector.
func (p *Projector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLag, descProjected, descQueue, descDropped, descCaughtUp, descReprojected, descFailures, descTypeIDsLeftOut, descDelay} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (p *Projector) Collect(ch chan<- prometheus.Metric) {
	n, _, dropped, _ := p.queue.state()
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, p.Lag().Seconds())
	for i, name := range outcomeNames {
		ch <- prometheus.MustNewConstMetric(descProjected, prometheus.CounterValue, float64(p.projected[i].Load()), name)
	}
	ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(dropped))
	ch <- prometheus.MustNewConstMetric(descCaughtUp, prometheus.CounterValue, float64(p.caughtUp.Load()))
	ch <- prometheus.MustNewConstMetric(descReprojected, prometheus.CounterValue, float64(p.reproj.Load()))
	ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(p.failures.Load()))
	ch <- prometheus.MustNewConstMetric(descTypeIDsLeftOut, prometheus.CounterValue, float64(p.typeIDsLeftOut.Load()))
	ch <- p.delay.metric()
}

// delayBuckets are the upper bounds of cardbox_analytics_delay_seconds.
var delayBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// histogram is a lock-protected histogram of delays.
type histogram struct {
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative
	count  uint64
	sum    float64
}

func (h *histogram) observe(v float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts == nil {
		h.counts = make([]uint64, len(delayBuckets))
	}
	for i, b := range delayBuckets {
		if v <= b {
			h.counts[i]++
			break
		}
	}
	h.count++
	h.sum += v
}

func (h *histogram) metric() prometheus.Metric {
	h.mu.Lock()
	defer h.mu.Unlock()
	buckets := make(map[float64]uint64, len(delayBuckets))
	var cum uint64
	for i, b := range delayBuckets {
		if h.counts != nil {
			cum += h.counts[i]
		}
		buckets[b] = cum
	}
	return prometheus.MustNewConstHistogram(descDelay, h.count, h.sum, buckets)
}
