package api

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/store"
)

// StatsSource is the store's part of GET /v1/metrics.
type StatsSource interface {
	Stats() store.Stats
}

// cxdbMetrics serves GET /v1/metrics in the reference's JSON shape (spec
// section 4.11), which the CXDB UI's dashboard reads: every key is present
// (a missing one crashes the page). Rates are over the last minute and
// five minutes of scrapes; figures cardbox does not track are 0 or null.
type cxdbMetrics struct {
	svc     *service.Service
	stats   StatsSource
	dataDir string
	start   time.Time

	httpReqs, httpErrs atomic.Int64

	mu      sync.Mutex
	samples []metricSample // one per scrape, the last 5 minutes
	history map[string][]float64
}

type metricSample struct {
	at                  time.Time
	appends, reqs, errs int64
}

func newCXDBMetrics(svc *service.Service, stats StatsSource) *cxdbMetrics {
	return &cxdbMetrics{svc: svc, stats: stats, start: time.Now(), history: map[string][]float64{}}
}

// count counts HTTP requests and error statuses, event streams excepted.
func (m *cxdbMetrics) count(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if c.Path() == "/v1/events" {
			return err
		}
		m.httpReqs.Add(1)
		if err != nil || c.Response().Status >= 400 {
			m.httpErrs.Add(1)
		}
		return err
	}
}

func (m *cxdbMetrics) serve(c echo.Context) error {
	now := time.Now()
	var st store.Stats
	if m.stats != nil {
		st = m.stats.Stats()
	}
	rates := m.sample(now, metricSample{at: now, appends: st.Appends, reqs: m.httpReqs.Load(), errs: m.httpErrs.Load()})
	total, idle := m.svc.Hub().Count(now, 60*time.Second)
	return c.JSON(http.StatusOK, map[string]any{
		"ts":             now.UTC().Format("2006-01-02T15:04:05.000Z"),
		"uptime_seconds": now.Sub(m.start).Seconds(),
		"memory":         memoryMetrics(),
		"sessions":       map[string]any{"total": total, "active": total - idle, "idle": idle, "last_activity_unix_ms": now.UnixMilli()},
		"objects": map[string]any{
			"contexts_total": st.Contexts, "heads_total": st.Contexts, "turns_total": st.Turns, "blobs_total": st.Blobs,
			"registry_types_total": 0, "registry_bundles_total": 0,
		},
		"storage": map[string]any{
			"turns_log_bytes": st.LogBytes, "turns_index_bytes": 0, "turns_meta_bytes": 0, "heads_table_bytes": 0,
			"blobs_pack_bytes": st.PackBytes, "blobs_index_bytes": 0,
			"data_dir_total_bytes": diskTotal(m.dataDir), "data_dir_free_bytes": diskFree(m.dataDir),
		},
		"filesystem": map[string]any{"snapshots_total": 0, "index_bytes": 0, "content_bytes": 0},
		"perf":       rates,
		"errors":     map[string]any{"total": m.httpErrs.Load(), "by_type": map[string]any{"http": m.httpErrs.Load()}},
	})
}

// sample records a scrape and returns the perf object.
func (m *cxdbMetrics) sample(now time.Time, s metricSample) map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, s)
	for len(m.samples) > 1 && now.Sub(m.samples[0].at) > 5*time.Minute {
		m.samples = m.samples[1:]
	}
	rate := func(window time.Duration, f func(metricSample) int64) float64 {
		first := m.samples[0]
		for _, x := range m.samples {
			if now.Sub(x.at) <= window {
				first = x
				break
			}
		}
		secs := now.Sub(first.at).Seconds()
		if secs <= 0 {
			return 0
		}
		return float64(f(s)-f(first)) / secs
	}
	appends := func(x metricSample) int64 { return x.appends }
	reqs := func(x metricSample) int64 { return x.reqs }
	errs := func(x metricSample) int64 { return x.errs }
	perf := map[string]any{
		"append_tps_1m": rate(time.Minute, appends), "append_tps_5m": rate(5*time.Minute, appends),
		"http_req_tps_1m": rate(time.Minute, reqs), "http_req_tps_5m": rate(5*time.Minute, reqs),
		"http_errors_tps_1m": rate(time.Minute, errs), "http_errors_tps_5m": rate(5*time.Minute, errs),
		"get_last_tps_1m": 0.0, "get_last_tps_5m": 0.0, "get_blob_tps_1m": 0.0, "get_blob_tps_5m": 0.0,
		"registry_ingest_tps_1m": 0.0, "registry_ingest_tps_5m": 0.0,
	}
	for _, k := range []string{"append", "get_last", "get_blob", "http_req"} {
		h := append(m.history[k], perf[k+"_tps_1m"].(float64))
		if len(h) > 30 {
			h = h[len(h)-30:]
		}
		m.history[k] = h
		perf[k+"_tps_history"] = append([]float64(nil), h...)
	}
	for _, k := range []string{"append", "get_last", "get_blob", "http"} {
		perf[k+"_latency_ms"] = map[string]any{"p50": nil, "p95": nil, "p99": nil, "max": nil, "count": 0}
	}
	return perf
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
		"budget_bytes": budget, "budget_pct": 0.7, "hard_cap_bytes": int64(24 << 30), "pressure_ratio": pressure,
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
