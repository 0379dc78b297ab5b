package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/loadgen"
)

// HTTPConfig is what RunHTTP drives.
type HTTPConfig struct {
	// Addr and HTTPAddr are the server's binary and HTTP addresses.
	Addr, HTTPAddr string
	// Readers HTTP clients read typed pages of PageTurns turns round
	// Contexts contexts for Duration; the turns' payloads are Size bytes.
	Readers, Contexts, PageTurns, Size int
	Duration                           time.Duration
	// Appenders binary connections append for EventsDuration while one
	// subscriber reads /v1/events; 0 skips the events phase.
	Appenders      int
	EventsDuration time.Duration
	// JSON prints the results as JSON.
	JSON bool
}

// benchHTTPResult is what RunHTTP reports.
type benchHTTPResult struct {
	Readers        int     `json:"readers"`
	PageTurns      int     `json:"page_turns"`
	PagesPerSec    float64 `json:"typed_pages_per_sec"`
	PageP50Ms      float64 `json:"typed_page_p50_ms"`
	PageP99Ms      float64 `json:"typed_page_p99_ms"`
	PageBytes      int     `json:"typed_page_bytes"`
	Appenders      int     `json:"appenders"`
	EventsSeen     int     `json:"events_seen"`
	EventsMissed   int     `json:"events_missed"`
	EventP50Ms     float64 `json:"event_p50_ms"`
	EventP99Ms     float64 `json:"event_p99_ms"`
	EventP999Ms    float64 `json:"event_p999_ms"`
	AppendsPerSec  float64 `json:"appends_per_sec_during_events"`
	AppendP99Ms    float64 `json:"append_p99_ms_during_events"`
	ServerRSSMB    float64 `json:"server_rss_mb"`
	CPUSecondsUsed float64 `json:"server_cpu_seconds"`
}

// RunHTTP measures the CXDB HTTP API of a running server: typed turn
// pages per second, and how soon an events subscriber sees appended turns
// while many connections append. It prints the results on stdout and its
// progress (on a terminal) on stderr.
func RunHTTP(ctx context.Context, cfg HTTPConfig, stdout, stderr io.Writer) error {
	return benchHTTP(ctx, &cfg, stdout, stderr)
}

func benchHTTP(ctx context.Context, cfg *HTTPConfig, stdout, stderr io.Writer) error {
	progress := cli.NewProgress(stderr)
	progress.Show("publishing the conversation bundle at %s, filling %d contexts", cfg.HTTPAddr, cfg.Contexts)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Readers + 2}}
	base := "http://" + cfg.HTTPAddr
	if err := loadgen.PublishBundle(ctx, client, base, ""); err != nil {
		return err
	}
	contexts, err := fillContexts(ctx, cfg)
	if err != nil {
		return err
	}
	r := &benchHTTPResult{Readers: cfg.Readers, PageTurns: cfg.PageTurns, Appenders: cfg.Appenders}
	before, _ := scrapeMetrics(ctx, cfg.HTTPAddr)
	stop := progress.Every(250*time.Millisecond, phaseClock("typed-page phase", cfg.Duration))
	err = typedPagePhase(ctx, cfg, client, base, contexts, r)
	stop()
	if err != nil {
		return err
	}
	if cfg.EventsDuration > 0 {
		stop := progress.Every(250*time.Millisecond, phaseClock("events phase", cfg.EventsDuration))
		err := eventsPhase(ctx, cfg, client, base, r)
		stop()
		if err != nil {
			return err
		}
	}
	progress.Done("")
	if after, err := scrapeMetrics(ctx, cfg.HTTPAddr); err == nil {
		r.ServerRSSMB = after["process_resident_memory_bytes"] / (1 << 20)
		r.CPUSecondsUsed = after["process_cpu_seconds_total"] - before["process_cpu_seconds_total"]
	}
	return reportHTTP(stdout, cfg, r)
}

// phaseClock returns the progress line of a phase of length d that
// starts now.
func phaseClock(name string, d time.Duration) func() string {
	start := time.Now()
	return func() string {
		return fmt.Sprintf("%s: %.0f s of %.0f s", name, min(time.Since(start), d).Seconds(), d.Seconds())
	}
}

// fillContexts creates cfg.Contexts contexts of cfg.PageTurns turns each
// over the binary protocol.
func fillContexts(ctx context.Context, cfg *HTTPConfig) ([]uint64, error) {
	c, err := loadgen.Dial(ctx, cfg.Addr, "")
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.Addr, err)
	}
	defer c.Close()
	gen := newPayloadGen(cfg.Size, 1)
	ids := make([]uint64, cfg.Contexts)
	for i := range ids {
		if ids[i], err = c.CreateContext(); err != nil {
			return nil, fmt.Errorf("create context: %w", err)
		}
		for range cfg.PageTurns {
			if err := c.AppendTurn(ids[i], gen.next()); err != nil {
				return nil, fmt.Errorf("append: %w", err)
			}
		}
	}
	return ids, nil
}

// typedPagePhase has cfg.Readers clients read
// /v1/contexts/{id}/turns?limit=N&view=typed round the contexts, one
// request in flight each, and checks every page holds N turns, none with
// an error.
func typedPagePhase(ctx context.Context, cfg *HTTPConfig, client *http.Client, base string, contexts []uint64, r *benchHTTPResult) error {
	lat := make([][]time.Duration, cfg.Readers)
	errs := make([]error, cfg.Readers)
	pageBytes := make([]int, cfg.Readers)
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for w := range cfg.Readers {
		wg.Go(func() {
			// One body buffer per reader: the load generator shares the
			// machine, and growing a fresh 80 KiB buffer per page cost it
			// more CPU than the server spent on the page.
			body := bytes.NewBuffer(make([]byte, 0, 256<<10))
			for i := w; time.Now().Before(deadline) && errs[w] == nil; i++ {
				url := base + "/v1/contexts/" + strconv.FormatUint(contexts[i%len(contexts)], 10) + "/turns?view=typed&limit=" + strconv.Itoa(cfg.PageTurns)
				t0 := time.Now()
				pageBytes[w], errs[w] = readTypedPage(ctx, client, url, cfg.PageTurns, body)
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return err
	}
	all := flatten(lat)
	r.PagesPerSec = float64(len(all)) / time.Since(start).Seconds()
	r.PageP50Ms, r.PageP99Ms, _ = percentiles(all)
	r.PageBytes = pageBytes[0]
	return nil
}

// readTypedPage gets one page into buf and checks it cheaply (the load
// generator shares the machine with the server): status 200, n turns, no
// per-turn error.
func readTypedPage(ctx context.Context, client *http.Client, url string, n int, buf *bytes.Buffer) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	body := buf.Bytes()
	switch {
	case err != nil:
		return 0, err
	case resp.StatusCode != http.StatusOK:
		return 0, fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	case bytes.Count(body, []byte(`"turn_id":`)) != n:
		return 0, fmt.Errorf("GET %s: want %d turns: %.300s", url, n, body)
	case bytes.Contains(body, []byte(`"error":`)):
		return 0, fmt.Errorf("GET %s: a turn failed to render: %.300s", url, body)
	}
	return len(body), nil
}

func flatten(v [][]time.Duration) []time.Duration {
	var all []time.Duration
	for _, l := range v {
		all = append(all, l...)
	}
	return all
}

func reportHTTP(w io.Writer, cfg *HTTPConfig, r *benchHTTPResult) error {
	if cfg.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "typed pages: %d readers, %d turns per page (%d B)\n", r.Readers, r.PageTurns, r.PageBytes)
	fmt.Fprintf(w, "  pages/s               %.0f\n", r.PagesPerSec)
	fmt.Fprintf(w, "  page latency          p50 %.3f ms  p99 %.3f ms\n", r.PageP50Ms, r.PageP99Ms)
	if cfg.EventsDuration > 0 {
		fmt.Fprintf(w, "events: %d appenders over the binary protocol, one /v1/events subscriber\n", r.Appenders)
		fmt.Fprintf(w, "  appends/s             %.0f (append p99 %.3f ms)\n", r.AppendsPerSec, r.AppendP99Ms)
		fmt.Fprintf(w, "  events seen           %d (missed %d)\n", r.EventsSeen, r.EventsMissed)
		fmt.Fprintf(w, "  append sent → event   p50 %.3f ms  p99 %.3f ms  p999 %.3f ms\n", r.EventP50Ms, r.EventP99Ms, r.EventP999Ms)
	}
	fmt.Fprintf(w, "server: %.1f s CPU during both phases, RSS %.1f MB\n", r.CPUSecondsUsed, r.ServerRSSMB)
	return nil
}
