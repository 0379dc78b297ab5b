package api

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cardboxhq/cardbox/store"
)

// StoreStats is what /metrics reports about the turn store.
type StoreStats interface {
	Stats() store.Stats
	DatabaseBytes(ctx context.Context) (int64, error)
}

// NewRegistry returns a Prometheus registry with the process and Go
// runtime collectors, the extra collectors (HTTPMetrics, listeners, ...)
// and, if s is not nil, the turn store's gauges.
func NewRegistry(s StoreStats, extra ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	reg.MustRegister(extra...)
	if s != nil {
		reg.MustRegister(&storeCollector{s: s})
	}
	return reg
}

// storeCollector reads the store's stats at scrape time.
type storeCollector struct{ s StoreStats }

var storeDescs = map[string]*prometheus.Desc{
	"contexts":      prometheus.NewDesc("cardbox_contexts", "Contexts in the turn store.", nil, nil),
	"turns":         prometheus.NewDesc("cardbox_turns", "Turns in the turn store.", nil, nil),
	"blobs":         prometheus.NewDesc("cardbox_blobs", "Blobs in the blob pack.", nil, nil),
	"holes":         prometheus.NewDesc("cardbox_blob_pack_holes", "Damaged records of the blob pack, kept at start or found by a read since; their blobs cannot be read.", nil, nil),
	"pack":          prometheus.NewDesc("cardbox_blob_pack_bytes", "Size of the blob pack: the end of its last segment's data.", nil, nil),
	"log":           prometheus.NewDesc("cardbox_turn_log_bytes", "Size of the turn log: the end of its last segment's data.", nil, nil),
	"db":            prometheus.NewDesc("cardbox_database_bytes", "Bytes of the turn store's Postgres tables and indexes.", nil, nil),
	"stored":        prometheus.NewDesc("cardbox_stored_bytes", "Blob pack + turn log + Postgres turn store bytes.", nil, nil),
	"appends_total": prometheus.NewDesc("cardbox_appends_total", "Appends committed since start.", nil, nil),
	"commits_total": prometheus.NewDesc("cardbox_group_commits_total", "Group commits since start.", nil, nil),
	"files_seconds": prometheus.NewDesc("cardbox_group_files_seconds_total",
		"Time group commits spent making their files durable (blob pack and turn log, in parallel), since start.", nil, nil),
	"statement_seconds": prometheus.NewDesc("cardbox_group_statement_seconds_total",
		"Time group commits spent until their statement's answer was read (sent before the turn log is written, read after it; from the files' start), since start.", nil, nil),
	"commit_seconds": prometheus.NewDesc("cardbox_group_commit_seconds_total",
		"Time group commits spent in COMMIT (after the files and the statement), since start.", nil, nil),
	"damaged_served": prometheus.NewDesc("cardbox_damaged_turns_served_total",
		"Turns GET_LAST and GET_BEFORE served without their payload, which lies in a damaged record of the blob pack, since start.", nil, nil),
	"segments": prometheus.NewDesc("cardbox_segments",
		"Segments of the blob pack (file=\"blobs\") and of the turn log (file=\"turns\"), by state: sealed, closed (waiting to be sealed) or active.", []string{"file", "state"}, nil),
	"segment_bytes": prometheus.NewDesc("cardbox_segment_bytes",
		"Bytes the segments of the blob pack and of the turn log hold, by file and state (the active segment's up to its data end).", []string{"file", "state"}, nil),
}

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range storeDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	// A stalled Postgres must not hang the scrape: its size is then 0.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	dbBytes, _ := c.s.DatabaseBytes(ctx)
	gauge := func(name string, v float64) {
		ch <- prometheus.MustNewConstMetric(storeDescs[name], prometheus.GaugeValue, v)
	}
	counter := func(name string, v float64) {
		ch <- prometheus.MustNewConstMetric(storeDescs[name], prometheus.CounterValue, v)
	}
	gauge("contexts", float64(st.Contexts))
	gauge("turns", float64(st.Turns))
	gauge("blobs", float64(st.Blobs))
	gauge("holes", float64(st.PackHoles))
	gauge("pack", float64(st.PackBytes))
	gauge("log", float64(st.LogBytes))
	gauge("db", float64(dbBytes))
	gauge("stored", float64(st.PackBytes+st.LogBytes+dbBytes))
	counter("appends_total", float64(st.Appends))
	counter("commits_total", float64(st.Groups))
	counter("files_seconds", st.FilesTime.Seconds())
	counter("statement_seconds", st.StatementTime.Seconds())
	counter("commit_seconds", st.CommitTime.Seconds())
	counter("damaged_served", float64(st.DamagedTurnsServed))
	for _, seg := range st.Segments {
		ch <- prometheus.MustNewConstMetric(storeDescs["segments"], prometheus.GaugeValue, float64(seg.Count), seg.File, seg.State)
		ch <- prometheus.MustNewConstMetric(storeDescs["segment_bytes"], prometheus.GaugeValue, float64(seg.Bytes), seg.File, seg.State)
	}
}
