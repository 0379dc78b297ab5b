package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// scrapeMetrics reads the server's Prometheus metrics and returns the
// unlabelled samples by name.
func scrapeMetrics(ctx context.Context, addr string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// analyticsDelayP99 reads the server's cardbox_analytics_delay_seconds
// histogram and returns the upper bound of the bucket that holds its
// 99th percentile (0 when the server has none).
func analyticsDelayP99(ctx context.Context, addr string) float64 {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var bounds, counts []float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), `cardbox_analytics_delay_seconds_bucket{le="`)
		if !ok {
			continue
		}
		le, rest, _ := strings.Cut(line, `"} `)
		b, err1 := strconv.ParseFloat(le, 64)
		n, err2 := strconv.ParseFloat(rest, 64)
		if err1 == nil && err2 == nil {
			bounds, counts = append(bounds, b), append(counts, n) // cumulative, in order
		}
	}
	if len(counts) == 0 || counts[len(counts)-1] == 0 {
		return 0
	}
	total := counts[len(counts)-1]
	for i, n := range counts {
		if n >= 0.99*total {
			return bounds[i]
		}
	}
	return 0
}
