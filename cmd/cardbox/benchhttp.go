package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// benchHTTPConfig is what `cardbox bench-http` drives.
type benchHTTPConfig struct {
	addr, httpAddr string
	readers        int
	contexts       int
	pageTurns      int
	size           int
	duration       time.Duration
	appenders      int
	eventsDuration time.Duration
	jsonOut        bool
}

func benchHTTPCommand() *cli.Command {
	return &cli.Command{
		Name: "bench-http", Settings: []string{"binary-addr", "http-addr"},
		Purpose: "Benchmark a running cardboxd's CXDB HTTP API: typed turn pages per second, and /v1/events latency while connections append; progress on a terminal.",
		Rules: map[string]config.Rule{
			"readers": config.Positive, "contexts": config.Positive, "limit": config.Positive, "size": config.Positive,
			"appenders": config.Positive, "duration": config.Positive, "events-duration": config.NonNegative,
		},
		Setup: func(fs *flag.FlagSet) cli.Action {
			c := &benchHTTPConfig{}
			fs.IntVar(&c.readers, "readers", 8, "HTTP clients reading typed turn pages in parallel")
			fs.IntVar(&c.contexts, "contexts", 16, "contexts the readers spread over")
			fs.IntVar(&c.pageTurns, "limit", 64, "turns per context and per page (?limit=)")
			fs.IntVar(&c.size, "size", 1024, "payload size of each turn in bytes")
			fs.DurationVar(&c.duration, "duration", 10*time.Second, "length of the typed-page phase")
			fs.IntVar(&c.appenders, "appenders", 32, "binary connections appending during the events phase")
			fs.DurationVar(&c.eventsDuration, "events-duration", 10*time.Second, "length of the events phase (0 skips it)")
			fs.BoolVar(&c.jsonOut, "json", false, "print the results as JSON")
			return func(ctx context.Context, inv *cli.Invocation) error {
				c.addr, c.httpAddr = inv.Config.BinaryAddr, inv.Config.HTTPAddr
				return benchHTTP(ctx, c, inv)
			}
		},
	}
}

// benchHTTPResult is what bench-http reports.
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

// benchHTTP measures the CXDB HTTP API of a running server: typed turn
// pages per second, and how soon an events subscriber sees appended turns
// while many connections append.
func benchHTTP(ctx context.Context, cfg *benchHTTPConfig, inv *cli.Invocation) error {
	progress := cli.NewProgress(inv.Stderr)
	progress.Show("publishing the conversation bundle at %s, filling %d contexts", cfg.httpAddr, cfg.contexts)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.readers + 2}}
	base := "http://" + cfg.httpAddr
	if err := publishBundle(ctx, client, base, ""); err != nil {
		return err
	}
	contexts, err := fillContexts(ctx, cfg)
	if err != nil {
		return err
	}
	r := &benchHTTPResult{Readers: cfg.readers, PageTurns: cfg.pageTurns, Appenders: cfg.appenders}
	before, _ := scrapeMetrics(ctx, cfg.httpAddr)
	stop := progress.Every(250*time.Millisecond, phaseClock("typed-page phase", cfg.duration))
	err = typedPagePhase(ctx, cfg, client, base, contexts, r)
	stop()
	if err != nil {
		return err
	}
	if cfg.eventsDuration > 0 {
		stop := progress.Every(250*time.Millisecond, phaseClock("events phase", cfg.eventsDuration))
		err := eventsPhase(ctx, cfg, client, base, r)
		stop()
		if err != nil {
			return err
		}
	}
	progress.Done("")
	if after, err := scrapeMetrics(ctx, cfg.httpAddr); err == nil {
		r.ServerRSSMB = after["process_resident_memory_bytes"] / (1 << 20)
		r.CPUSecondsUsed = after["process_cpu_seconds_total"] - before["process_cpu_seconds_total"]
	}
	return reportHTTP(inv.Stdout, cfg, r)
}

// phaseClock returns the progress line of a phase of length d that
// starts now.
func phaseClock(name string, d time.Duration) func() string {
	start := time.Now()
	return func() string {
		return fmt.Sprintf("%s: %.0f s of %.0f s", name, min(time.Since(start), d).Seconds(), d.Seconds())
	}
}

// publishBundle publishes the canonical conversation types, which the
// load generator's payloads declare, so that the typed view renders them.
// key, when not empty, is the API key of a hosted server's tenant.
func publishBundle(ctx context.Context, client *http.Client, base, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/v1/registry/bundles/"+registry.ConversationBundleID, bytes.NewReader(registry.ConversationBundle))
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("publish bundle: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("publish bundle: %s: %s", resp.Status, body)
	}
	return nil
}

// fillContexts creates cfg.contexts contexts of cfg.pageTurns turns each
// over the binary protocol.
func fillContexts(ctx context.Context, cfg *benchHTTPConfig) ([]uint64, error) {
	c, err := dialBench(ctx, cfg.addr, "")
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.addr, err)
	}
	defer c.Close()
	gen := newPayloadGen(cfg.size, 1)
	ids := make([]uint64, cfg.contexts)
	for i := range ids {
		if ids[i], err = c.createContext(); err != nil {
			return nil, fmt.Errorf("create context: %w", err)
		}
		for range cfg.pageTurns {
			if err := c.appendTurn(ids[i], gen.next()); err != nil {
				return nil, fmt.Errorf("append: %w", err)
			}
		}
	}
	return ids, nil
}

// typedPagePhase has cfg.readers clients read
// /v1/contexts/{id}/turns?limit=N&view=typed round the contexts, one
// request in flight each, and checks every page holds N turns, none with
// an error.
func typedPagePhase(ctx context.Context, cfg *benchHTTPConfig, client *http.Client, base string, contexts []uint64, r *benchHTTPResult) error {
	lat := make([][]time.Duration, cfg.readers)
	errs := make([]error, cfg.readers)
	pageBytes := make([]int, cfg.readers)
	start := time.Now()
	deadline := start.Add(cfg.duration)
	var wg sync.WaitGroup
	for w := range cfg.readers {
		wg.Go(func() {
			// One body buffer per reader: the load generator shares the
			// machine, and growing a fresh 80 KiB buffer per page cost it
			// more CPU than the server spent on the page.
			body := bytes.NewBuffer(make([]byte, 0, 256<<10))
			for i := w; time.Now().Before(deadline) && errs[w] == nil; i++ {
				url := base + "/v1/contexts/" + strconv.FormatUint(contexts[i%len(contexts)], 10) + "/turns?view=typed&limit=" + strconv.Itoa(cfg.pageTurns)
				t0 := time.Now()
				pageBytes[w], errs[w] = readTypedPage(ctx, client, url, cfg.pageTurns, body)
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

func reportHTTP(w io.Writer, cfg *benchHTTPConfig, r *benchHTTPResult) error {
	if cfg.jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "typed pages: %d readers, %d turns per page (%d B)\n", r.Readers, r.PageTurns, r.PageBytes)
	fmt.Fprintf(w, "  pages/s               %.0f\n", r.PagesPerSec)
	fmt.Fprintf(w, "  page latency          p50 %.3f ms  p99 %.3f ms\n", r.PageP50Ms, r.PageP99Ms)
	if cfg.eventsDuration > 0 {
		fmt.Fprintf(w, "events: %d appenders over the binary protocol, one /v1/events subscriber\n", r.Appenders)
		fmt.Fprintf(w, "  appends/s             %.0f (append p99 %.3f ms)\n", r.AppendsPerSec, r.AppendP99Ms)
		fmt.Fprintf(w, "  events seen           %d (missed %d)\n", r.EventsSeen, r.EventsMissed)
		fmt.Fprintf(w, "  append sent → event   p50 %.3f ms  p99 %.3f ms  p999 %.3f ms\n", r.EventP50Ms, r.EventP99Ms, r.EventP999Ms)
	}
	fmt.Fprintf(w, "server: %.1f s CPU during both phases, RSS %.1f MB\n", r.CPUSecondsUsed, r.ServerRSSMB)
	return nil
}
