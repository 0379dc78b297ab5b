package cxdbhttp

import (
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/store"
)

// StatsSource is the store's part of GET /v1/metrics.
type StatsSource interface {
	Stats() store.Stats
}

// cxdbMetrics serves GET /v1/metrics in the reference's JSON shape (spec
// section 4.11), which the CXDB UI's dashboard reads: every key is present
// (a missing one crashes the page). Counts and latencies come from the
// server's Prometheus metrics (the same figures /metrics serves); rates
// are over the last minute and five minutes of scrapes, latencies since
// the start. Figures cardbox does not track are 0 or null.
type cxdbMetrics struct {
	svc     *service.Service
	stats   StatsSource
	prom    prometheus.Gatherer
	dataDir string
	start   time.Time

	mu      sync.Mutex
	samples []metricSample // one per scrape, the last 5 minutes
	history map[string][]float64
}

// metricSample is the counters at one scrape, by the reference's perf
// names.
type metricSample struct {
	at     time.Time
	counts map[string]int64
}

func newCXDBMetrics(svc *service.Service, opts Options) *cxdbMetrics {
	return &cxdbMetrics{svc: svc, stats: opts.Stats, prom: opts.Gatherer, dataDir: opts.DataDir, start: time.Now(), history: map[string][]float64{}}
}

func (m *cxdbMetrics) serve(c echo.Context) error {
	// Service-wide figures are for dev mode; in hosted mode every key that
	// reaches /v1 is a tenant's (operators read /metrics instead).
	if _, hosted := api.PrincipalFrom(c.Request().Context()); hosted {
		return m.serveTenant(c)
	}
	now := time.Now()
	var st store.Stats
	if m.stats != nil {
		st = m.stats.Stats()
	}
	reg, err := m.registry(c)
	if err != nil {
		return err
	}
	ps := gatherStats(m.prom)
	sample := metricSample{at: now, counts: map[string]int64{
		"append": st.Appends, "get_last": ps.count("cardbox_binary_requests_total", binaryType("GET_LAST")),
		"get_blob": ps.count("cardbox_binary_requests_total", binaryType("GET_BLOB")),
		"http_req": ps.count("cardbox_http_requests_total", httpRequest), "http_errors": ps.count("cardbox_http_requests_total", httpError),
		"registry_ingest": ps.count("cardbox_http_requests_total", bundlePut),
	}}
	perf := m.sample(now, sample)
	perf["append_latency_ms"] = ps.latency("cardbox_binary_request_duration_seconds", binaryType("APPEND_TURN"))
	perf["get_last_latency_ms"] = ps.latency("cardbox_binary_request_duration_seconds", binaryType("GET_LAST"))
	perf["get_blob_latency_ms"] = ps.latency("cardbox_binary_request_duration_seconds", binaryType("GET_BLOB"))
	perf["http_latency_ms"] = ps.latency("cardbox_http_request_duration_seconds", httpRequest)
	total, idle := m.svc.Hub().Count("", now, 60*time.Second)
	return c.JSON(http.StatusOK, map[string]any{
		"ts":             now.UTC().Format("2006-01-02T15:04:05.000Z"),
		"uptime_seconds": now.Sub(m.start).Seconds(),
		"memory":         memoryMetrics(),
		"sessions":       map[string]any{"total": total, "active": total - idle, "idle": idle, "last_activity_unix_ms": now.UnixMilli()},
		"objects": map[string]any{
			"contexts_total": st.Contexts, "heads_total": st.Contexts, "turns_total": st.Turns, "blobs_total": st.Blobs,
			"registry_types_total": reg.TypeCount(), "registry_bundles_total": reg.BundleCount(),
		},
		"storage": map[string]any{
			"turns_log_bytes": st.LogBytes, "turns_index_bytes": 0, "turns_meta_bytes": 0, "heads_table_bytes": 0,
			"blobs_pack_bytes": st.PackBytes, "blobs_index_bytes": 0,
			"data_dir_total_bytes": diskTotal(m.dataDir), "data_dir_free_bytes": diskFree(m.dataDir),
		},
		"filesystem": map[string]any{"snapshots_total": 0, "index_bytes": 0, "content_bytes": 0},
		"perf":       perf,
		"errors":     map[string]any{"total": sample.counts["http_errors"], "by_type": map[string]any{"http": sample.counts["http_errors"]}},
	})
}

// serveTenant is GET /v1/metrics for a tenant's key in hosted mode: the
// same shape, with the tenant's own counts, and null for every figure
// that only exists server-wide (rates, latencies, storage, memory), which
// would tell one tenant of the others' activity.
func (m *cxdbMetrics) serveTenant(c echo.Context) error {
	now := time.Now()
	t, err := api.RequestTenant(c, m.svc.Tenant)
	if err != nil {
		return err
	}
	reg, err := m.svc.Registry(c.Request().Context(), t)
	if err != nil {
		return err
	}
	contexts := len(m.svc.Contexts(t))
	total, idle := m.svc.Hub().Count(t.ID, now, 60*time.Second)
	perf := map[string]any{}
	for _, r := range perfRates {
		perf[r.name+"_tps_1m"], perf[r.name+"_tps_5m"] = nil, nil
		if r.history {
			perf[r.name+"_tps_history"] = []float64{}
		}
	}
	for _, k := range []string{"append", "get_last", "get_blob", "http"} {
		perf[k+"_latency_ms"] = map[string]any{"p50": nil, "p95": nil, "p99": nil, "max": nil, "count": nil}
	}
	return c.JSON(http.StatusOK, map[string]any{
		"ts":             now.UTC().Format("2006-01-02T15:04:05.000Z"),
		"uptime_seconds": now.Sub(m.start).Seconds(),
		"memory":         map[string]any{"process_rss_bytes": nil, "pressure_level": "OK"},
		"sessions":       map[string]any{"total": total, "active": total - idle, "idle": idle, "last_activity_unix_ms": now.UnixMilli()},
		"objects": map[string]any{
			"contexts_total": contexts, "heads_total": contexts, "turns_total": nil, "blobs_total": nil,
			"registry_types_total": reg.TypeCount(), "registry_bundles_total": reg.BundleCount(),
		},
		"storage": map[string]any{
			"turns_log_bytes": nil, "turns_index_bytes": nil, "turns_meta_bytes": nil, "heads_table_bytes": nil,
			"blobs_pack_bytes": nil, "blobs_index_bytes": nil, "data_dir_total_bytes": nil, "data_dir_free_bytes": nil,
		},
		"filesystem": map[string]any{"snapshots_total": nil, "index_bytes": nil, "content_bytes": nil},
		"perf":       perf,
		"errors":     map[string]any{"total": nil, "by_type": map[string]any{}},
	})
}

// registry is the caller's tenant's registry, for its counts.
func (m *cxdbMetrics) registry(c echo.Context) (*registry.Registry, error) {
	t, err := api.RequestTenant(c, m.svc.Tenant)
	if err != nil {
		return nil, err
	}
	return m.svc.Registry(c.Request().Context(), t)
}

// perfRates are the perf object's rates: counts per second over the last
// minute and five minutes, and for some a history of the 1-minute rate.
var perfRates = []struct {
	name    string
	history bool
}{{"append", true}, {"get_last", true}, {"get_blob", true}, {"http_req", true}, {"http_errors", false}, {"registry_ingest", false}}

// sample records a scrape and returns the perf object's rates.
func (m *cxdbMetrics) sample(now time.Time, s metricSample) map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, s)
	for len(m.samples) > 1 && now.Sub(m.samples[0].at) > 5*time.Minute {
		m.samples = m.samples[1:]
	}
	perf := map[string]any{}
	for _, r := range perfRates {
		perf[r.name+"_tps_1m"] = m.rate(now, time.Minute, r.name)
		perf[r.name+"_tps_5m"] = m.rate(now, 5*time.Minute, r.name)
		if r.history {
			h := append(m.history[r.name], perf[r.name+"_tps_1m"].(float64))
			if len(h) > 30 {
				h = h[len(h)-30:]
			}
			m.history[r.name] = h
			perf[r.name+"_tps_history"] = slices.Clone(h)
		}
	}
	return perf
}

// rate is the named count's rate over the window ending at the last
// sample (the oldest sample in the window is its start).
func (m *cxdbMetrics) rate(now time.Time, window time.Duration, name string) float64 {
	last := m.samples[len(m.samples)-1]
	first := last
	for _, x := range m.samples {
		if now.Sub(x.at) <= window {
			first = x
			break
		}
	}
	secs := last.at.Sub(first.at).Seconds()
	if secs <= 0 {
		return 0
	}
	return float64(last.counts[name]-first.counts[name]) / secs
}

// memoryMetrics reads the machine's and the process's memory from /proc
// (Linux); what cannot be read is 0 or null.
func memoryMetrics() map[string]any {
	info := meminfo()
	var rss any
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			if pages, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				rss = pages * int64(os.Getpagesize())
			}
		}
	}
	budget := max(info["MemAvailable"]*7/10, 1)
	pressure := 0.0
	if n, ok := rss.(int64); ok {
		pressure = float64(n) / float64(budget)
	}
	return map[string]any{
		"sys_total_bytes": info["MemTotal"], "sys_available_bytes": info["MemAvailable"], "sys_free_bytes": info["MemFree"],
		"sys_cached_bytes": info["Cached"], "sys_swap_total_bytes": info["SwapTotal"], "sys_swap_free_bytes": info["SwapFree"],
		"process_rss_bytes": rss, "process_vmem_bytes": nil, "process_heap_bytes": nil, "process_open_fds": nil,
		"budget_bytes": budget, "budget_pct": 0.7, "hard_cap_bytes": info["MemTotal"], "pressure_ratio": pressure,
		"pressure_level": pressureLevel(pressure), "spill_threshold_bytes": budget * 85 / 100, "spill_critical_bytes": budget * 95 / 100,
	}
}

func pressureLevel(p float64) string {
	switch {
	case p >= 0.92:
		return "CRITICAL"
	case p >= 0.80:
		return "HOT"
	case p >= 0.60:
		return "WARN"
	}
	return "OK"
}

// meminfo returns /proc/meminfo in bytes.
func meminfo() map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if f := strings.Fields(rest); ok && len(f) > 0 {
			if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				out[name] = n << 10
			}
		}
	}
	return out
}

func diskTotal(dir string) int64 {
	var st syscall.Statfs_t
	if dir == "" || syscall.Statfs(dir, &st) != nil {
		return 0
	}
	return int64(st.Blocks) * st.Bsize
}

func diskFree(dir string) int64 {
	var st syscall.Statfs_t
	if dir == "" || syscall.Statfs(dir, &st) != nil {
		return 0
	}
	return int64(st.Bavail) * st.Bsize
}
