package cxdbhttp

import (
	"math"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cardboxhq/cardbox/api"
)

// promStats reads the server's own Prometheus metrics, so that
// GET /v1/metrics reports the same counts and latencies as /metrics.
type promStats map[string]*dto.MetricFamily

func gatherStats(g prometheus.Gatherer) promStats {
	out := promStats{}
	if g == nil {
		return out
	}
	families, _ := g.Gather() // a partial answer is still the best we have
	for _, f := range families {
		out[f.GetName()] = f
	}
	return out
}

// labelsMatch reports whether m carries every label in want.
func labelsMatch(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// count sums the counter samples of family name that keep accepts.
func (p promStats) count(name string, keep func(*dto.Metric) bool) int64 {
	var sum float64
	for _, m := range p[name].GetMetric() {
		if keep(m) {
			sum += m.GetCounter().GetValue()
		}
	}
	return int64(sum)
}

// latency merges the histogram samples of family name that keep accepts
// and returns the reference's latency object in milliseconds: quantiles
// estimated within buckets (as PromQL's histogram_quantile does), max as
// the upper bound of the highest bucket used, all since the start.
func (p promStats) latency(name string, keep func(*dto.Metric) bool) map[string]any {
	var count uint64
	bounds := map[float64]uint64{}
	for _, m := range p[name].GetMetric() {
		if !keep(m) {
			continue
		}
		h := m.GetHistogram()
		count += h.GetSampleCount()
		for _, b := range h.GetBucket() {
			bounds[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	out := map[string]any{"p50": nil, "p95": nil, "p99": nil, "max": nil, "count": count}
	if count == 0 {
		return out
	}
	les := make([]float64, 0, len(bounds))
	for le := range bounds {
		les = append(les, le)
	}
	slices.Sort(les)
	for _, q := range []struct {
		key string
		q   float64
	}{{"p50", 0.50}, {"p95", 0.95}, {"p99", 0.99}} {
		out[q.key] = ms(quantile(q.q, les, bounds, count))
	}
	for _, le := range les {
		if bounds[le] == count {
			out["max"] = ms(le)
			break
		}
	}
	return out
}

// quantile interpolates linearly within the bucket holding rank q·count.
func quantile(q float64, les []float64, cum map[float64]uint64, count uint64) float64 {
	rank := q * float64(count)
	lower, below := 0.0, uint64(0)
	for _, le := range les {
		if float64(cum[le]) >= rank {
			if math.IsInf(le, 1) {
				return lower // beyond the last bound: say the bound
			}
			in := cum[le] - below
			if in == 0 {
				return le
			}
			return lower + (le-lower)*(rank-float64(below))/float64(in)
		}
		lower, below = le, cum[le]
	}
	return lower
}

func ms(seconds float64) any {
	if math.IsInf(seconds, 0) || math.IsNaN(seconds) {
		return nil
	}
	return math.Round(seconds*1e6) / 1e3
}

// binaryType keeps the binary requests of one message type.
func binaryType(t string) func(*dto.Metric) bool {
	return func(m *dto.Metric) bool { return label(m, "type") == t }
}

// httpRequest keeps HTTP requests other than event streams (which last
// as long as the client stays).
func httpRequest(m *dto.Metric) bool { return label(m, "route") != "/v1/events" }

// httpError keeps HTTP requests answered with an error status, but not
// those whose client went away (499): nobody got an error.
func httpError(m *dto.Metric) bool {
	status, _ := strconv.Atoi(label(m, "status"))
	return httpRequest(m) && status >= 400 && status != api.StatusClientClosed
}

// bundlePut keeps registry publications.
func bundlePut(m *dto.Metric) bool {
	return labelsMatch(m, map[string]string{"method": "PUT", "route": "/v1/registry/bundles/:bundle_id"})
}
