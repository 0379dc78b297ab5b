package connlimit

import "github.com/prometheus/client_golang/prometheus"

// Collector reports the connections of named listeners to Prometheus.
type Collector struct {
	listeners map[string]*Listener
}

// NewCollector returns a collector for listeners, keyed by the name that
// labels their series (for example "binary", "http").
func NewCollector(listeners map[string]*Listener) *Collector {
	return &Collector{listeners: listeners}
}

var (
	openDesc = prometheus.NewDesc("cardbox_connections_open",
		"Connections accepted and not yet closed.", []string{"listener"}, nil)
	refusedDesc = prometheus.NewDesc("cardbox_connections_refused_total",
		"Connections refused because the listener was at its connection limit.", []string{"listener"}, nil)
	acceptErrorsDesc = prometheus.NewDesc("cardbox_accept_errors_total",
		"Temporary accept failures (such as EMFILE) that the listener backed off from.", []string{"listener"}, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- openDesc
	ch <- refusedDesc
	ch <- acceptErrorsDesc
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for name, l := range c.listeners {
		ch <- prometheus.MustNewConstMetric(openDesc, prometheus.GaugeValue, float64(l.Open()), name)
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(l.Refused()), name)
		ch <- prometheus.MustNewConstMetric(acceptErrorsDesc, prometheus.CounterValue, float64(l.AcceptErrors()), name)
	}
}
