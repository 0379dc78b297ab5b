// Package bench measures a running cardboxd: durable appends and
// GET_LAST over the CXDB binary protocol with the machine's flush figures
// (Run, `cardbox bench`), typed turn pages and the event stream of the
// CXDB HTTP API (RunHTTP, `cardbox bench-http`), and one tenant's appends
// beside another hammering past its rate limit (RunTenants, `cardbox
// bench-tenants`).
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/time/rate"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/cmd/internal/loadgen"
)

// Config is what Run drives.
type Config struct {
	// Addr and HTTPAddr are the server's binary and HTTP addresses.
	Addr, HTTPAddr string
	// Key is an API key (writer) of a hosted server; empty in dev mode.
	Key string
	// DataDir is the server's data directory, where the flush probes
	// time fdatasync.
	DataDir string
	// ServerDB opens the server's database for the durable-flush floor;
	// the function it returns releases it.
	ServerDB func(context.Context) (*database.DB, func(), error)
	// Rate is appends per second in all in the append phase, 0: as fast
	// as they go.
	Rate float64
	// Conns connections append in parallel to Contexts contexts, payloads
	// of Size bytes.
	Conns, Contexts, Size int
	// Turns ends the append phase after this many turns; 0: after
	// Duration.
	Turns    int
	Duration time.Duration
	// ReadDuration is the length of the GET_LAST phase.
	ReadDuration time.Duration
	// LatencyTurns is how many appends the one-connection phase times.
	LatencyTurns int
	// JSON prints the results as JSON.
	JSON bool
	// IdempotencyKeys sends every append of the append phase with an
	// idempotency key of its own.
	IdempotencyKeys bool

	progress *cli.Progress
}

// benchResult is what Run reports.
type benchResult struct {
	Conns             int     `json:"conns"`
	Contexts          int     `json:"contexts"`
	PayloadBytes      int     `json:"payload_bytes"`
	Appends           int64   `json:"appends"`
	AppendsPerSec     float64 `json:"appends_per_sec"`
	AppendP50Ms       float64 `json:"append_p50_ms"`
	AppendP99Ms       float64 `json:"append_p99_ms"`
	AppendP999Ms      float64 `json:"append_p999_ms"`
	SingleConnP50Ms   float64 `json:"single_conn_append_p50_ms"`
	SingleConnP99Ms   float64 `json:"single_conn_append_p99_ms"`
	GetLastPerSec     float64 `json:"get_last10_payload_per_sec"`
	GetLastP50Ms      float64 `json:"get_last10_payload_p50_ms"`
	GetLastP99Ms      float64 `json:"get_last10_payload_p99_ms"`
	StoredBytesByTurn float64 `json:"stored_bytes_per_turn"`
	ServerRSSMB       float64 `json:"server_rss_mb"`
	ServerTurns       float64 `json:"server_turns"`
	// AnalyticsDelayP99S is the p99 of the server's delay from a turn's
	// commit to its analytics row (an upper bucket bound), since start.
	AnalyticsDelayP99S float64 `json:"analytics_delay_p99_s,omitempty"`
	// The server's time per group commit during the one-connection phase,
	// in each step: files durable, statement (in parallel with the files)
	// and COMMIT (after both).
	SingleConnFilesMs     float64 `json:"single_conn_group_files_ms,omitempty"`
	SingleConnStatementMs float64 `json:"single_conn_group_statement_ms,omitempty"`
	SingleConnCommitMs    float64 `json:"single_conn_group_commit_ms,omitempty"`
	machineFacts
}

// Run benchmarks a running cardboxd over the CXDB binary protocol:
// appends on cfg.Conns connections, one connection's append latency and
// GET_LAST, with the machine's flush figures and the CPU each append
// cost. It prints the results on stdout, and its progress (on a terminal)
// and warnings on stderr.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	cfg.progress = cli.NewProgress(stderr)
	return run(ctx, &cfg, stdout, stderr)
}

func run(ctx context.Context, cfg *Config, stdout, stderr io.Writer) error {
	r := &benchResult{Conns: cfg.Conns, Contexts: cfg.Contexts, PayloadBytes: cfg.Size}
	probeMachine(ctx, cfg, stderr, &r.machineFacts)
	before, _ := scrapeMetrics(ctx, cfg.HTTPAddr)
	cfg.progress.Show("creating %d contexts on %s", cfg.Contexts, cfg.Addr)
	contexts, err := createContexts(ctx, cfg)
	if err != nil {
		return err
	}
	cpu := startCPU(before)
	if err := appendPhase(ctx, cfg, contexts, r); err != nil {
		return err
	}
	now, err := scrapeMetrics(ctx, cfg.HTTPAddr)
	if err == nil {
		cpu.perAppend(now, r.Appends, &r.machineFacts)
	}
	if err := latencyPhase(ctx, cfg, contexts[0], r); err != nil {
		return err
	}
	if err := readPhase(ctx, cfg, contexts, r); err != nil {
		return err
	}
	r.AnalyticsDelayP99S = analyticsDelayP99(ctx, cfg.HTTPAddr)
	if after, err := scrapeMetrics(ctx, cfg.HTTPAddr); err == nil {
		r.ServerRSSMB = after["process_resident_memory_bytes"] / (1 << 20)
		r.ServerTurns = after["cardbox_turns"]
		if turns := after["cardbox_turns"] - before["cardbox_turns"]; turns > 0 {
			r.StoredBytesByTurn = (after["cardbox_stored_bytes"] - before["cardbox_stored_bytes"]) / turns
		}
		r.groupSteps(now, after)
	} else {
		cfg.warnf(stderr, "no server metrics (%v): RSS and stored bytes not reported", err)
	}
	cfg.progress.Done("")
	return report(stdout, cfg, r)
}

// warnf writes a warning on w (stderr), below the progress line.
func (c *Config) warnf(w io.Writer, format string, args ...any) {
	c.progress.Done("")
	fmt.Fprintf(w, "cardbox bench: "+format+"\n", args...)
}

// groupSteps sets the server's time per group commit in each step between
// two scrapes around the one-connection phase (the read phase commits
// nothing).
func (r *benchResult) groupSteps(before, after map[string]float64) {
	groups := after["cardbox_group_commits_total"] - before["cardbox_group_commits_total"]
	if before == nil || groups <= 0 {
		return
	}
	ms := func(name string) float64 { return (after[name] - before[name]) / groups * 1000 }
	r.SingleConnFilesMs = ms("cardbox_group_files_seconds_total")
	r.SingleConnStatementMs = ms("cardbox_group_statement_seconds_total")
	r.SingleConnCommitMs = ms("cardbox_group_commit_seconds_total")
}

func createContexts(ctx context.Context, cfg *Config) ([]uint64, error) {
	return contextsOf(ctx, cfg.Addr, cfg.Key, cfg.Contexts)
}

// appendPhase runs cfg.Conns writers, each appending to its share of the
// contexts, one request in flight per connection (as the official clients
// do).
func appendPhase(ctx context.Context, cfg *Config, contexts []uint64, r *benchResult) error {
	var count atomic.Int64
	lat := make([][]time.Duration, cfg.Conns)
	deadline := time.Now().Add(cfg.Duration)
	pace := rate.NewLimiter(rate.Limit(cfg.Rate), max(1, int(cfg.Rate/100)))
	if cfg.Rate <= 0 {
		pace = rate.NewLimiter(rate.Inf, 0)
	}
	more := func() bool {
		if pace.Wait(ctx) != nil {
			return false
		}
		if cfg.Turns > 0 {
			return count.Add(1) <= int64(cfg.Turns)
		}
		count.Add(1)
		return time.Now().Before(deadline)
	}
	start := time.Now()
	stop := cfg.progress.Every(250*time.Millisecond, func() string {
		return appendStatus(cfg, time.Since(start), count.Load())
	})
	defer stop()
	err := forEachConn(ctx, cfg, func(i int, c *loadgen.Conn) error {
		gen := newPayloadGen(cfg.Size, uint64(i))
		var key []byte
		for n := 0; more(); n++ {
			contextID, payload := contexts[(i+n*cfg.Conns)%len(contexts)], gen.next()
			if cfg.IdempotencyKeys {
				key = []byte(uuid.NewString())
			}
			t0 := time.Now()
			if err := c.AppendKeyed(contextID, payload, key); err != nil {
				return fmt.Errorf("append: %w", err)
			}
			lat[i] = append(lat[i], time.Since(t0))
		}
		return nil
	})
	elapsed := time.Since(start)
	all := slices.Concat(lat...)
	r.Appends = int64(len(all))
	r.AppendsPerSec = float64(len(all)) / elapsed.Seconds()
	r.AppendP50Ms, r.AppendP99Ms, r.AppendP999Ms = percentiles(all)
	return err
}

// appendStatus is the append phase's progress line.
func appendStatus(cfg *Config, elapsed time.Duration, appends int64) string {
	if cfg.Turns > 0 {
		appends = min(appends, int64(cfg.Turns))
	}
	rate := float64(appends) / max(elapsed.Seconds(), 0.001)
	if cfg.Turns > 0 {
		return fmt.Sprintf("append phase (%d connections): %d of %d turns, %.0f/s", cfg.Conns, appends, cfg.Turns, rate)
	}
	return fmt.Sprintf("append phase (%d connections): %.0f s of %.0f s, %d appends, %.0f/s",
		cfg.Conns, min(elapsed, cfg.Duration).Seconds(), cfg.Duration.Seconds(), appends, rate)
}

// latencyPhase measures appends with a single connection: no batching
// partner, so it shows the cost of one durable commit.
func latencyPhase(ctx context.Context, cfg *Config, contextID uint64, r *benchResult) error {
	c, err := loadgen.Dial(ctx, cfg.Addr, cfg.Key)
	if err != nil {
		return err
	}
	defer c.Close()
	gen := newPayloadGen(cfg.Size, 1<<32)
	lat := make([]time.Duration, 0, cfg.LatencyTurns)
	var done atomic.Int64
	stop := cfg.progress.Every(250*time.Millisecond, func() string {
		return fmt.Sprintf("one-connection latency: %d of %d appends", done.Load(), cfg.LatencyTurns)
	})
	defer stop()
	for range cfg.LatencyTurns {
		done.Add(1)
		payload := gen.next()
		t0 := time.Now()
		if err := c.AppendTurn(contextID, payload); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	r.SingleConnP50Ms, r.SingleConnP99Ms, _ = percentiles(lat)
	return nil
}

// readPhase runs GET_LAST(10, with payload) on cfg.Conns connections for
// cfg.ReadDuration, one request in flight on each (as the official clients
// do), and checks every answer (see loadgen.Conn.GetLast).
func readPhase(ctx context.Context, cfg *Config, contexts []uint64, r *benchResult) error {
	deadline := time.Now().Add(cfg.ReadDuration)
	start := time.Now()
	stop := cfg.progress.Every(250*time.Millisecond, func() string {
		return fmt.Sprintf("GET_LAST phase (%d connections): %.0f s of %.0f s",
			cfg.Conns, min(time.Since(start), cfg.ReadDuration).Seconds(), cfg.ReadDuration.Seconds())
	})
	defer stop()
	lat := make([][]time.Duration, cfg.Conns)
	errs := make([]error, cfg.Conns)
	var wg sync.WaitGroup
	for i := range cfg.Conns {
		wg.Go(func() { lat[i], errs[i] = readLoop(ctx, cfg.Addr, cfg.Key, contexts, i, deadline) })
	}
	wg.Wait()
	all := flatten(lat)
	r.GetLastPerSec = float64(len(all)) / time.Since(start).Seconds()
	r.GetLastP50Ms, r.GetLastP99Ms, _ = percentiles(all)
	return firstError(errs)
}

// readLoop is connection i's share of the read phase: it walks the
// contexts from the i-th on and returns the latency of each answer it
// checked.
func readLoop(ctx context.Context, addr, key string, contexts []uint64, i int, deadline time.Time) ([]time.Duration, error) {
	c, err := loadgen.Dial(ctx, addr, key)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	defer c.Close()
	var lat []time.Duration
	for n := 0; time.Now().Before(deadline); n++ {
		t0 := time.Now()
		if _, err := c.GetLast(contexts[(i+n)%len(contexts)], 10); err != nil {
			return lat, fmt.Errorf("get last: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

// forEachConn dials cfg.Conns connections and runs fn on each in parallel.
func forEachConn(ctx context.Context, cfg *Config, fn func(int, *loadgen.Conn) error) error {
	return onConns(ctx, cfg.Addr, cfg.Key, cfg.Conns, fn)
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func percentiles(d []time.Duration) (p50, p99, p999 float64) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1000
	}
	return at(0.50), at(0.99), at(0.999)
}

// payloadGen makes distinct msgpack payloads of about size bytes that look
// like conversation items: a map with a text field of random words, so they
// compress like real text. Each generator builds one template and then
// only rewrites a 20-digit counter inside it, so that the load generator
// spends its CPU on the protocol, not on making payloads (it shares the
// machine with the server). The counter starts at a random value, so that
// a run never repeats the payloads of an earlier run against the same
// server: the server would deduplicate them, skipping compression and blob
// writes, and the run would measure less than an append costs.
type payloadGen struct {
	template []byte
	counter  int // offset of the counter digits in template
	n        uint64
}

var words = strings.Fields("the agent reads a file then calls a tool and writes the answer with context " +
	"tokens model user assistant system result error retry plan step search code test build deploy")

const counterDigits = 20

func newPayloadGen(size int, seed uint64) *payloadGen {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var text strings.Builder
	text.WriteString(strings.Repeat("0", counterDigits))
	for text.Len() < size-40 {
		text.WriteString(" ")
		text.WriteString(words[rng.IntN(len(words))])
	}
	b, _ := msgpack.Marshal(map[string]any{"1": "user_input", "3": int64(1700000000000), "10": map[string]any{"1": text.String()}})
	return &payloadGen{template: b, counter: bytes.Index(b, []byte(strings.Repeat("0", counterDigits))), n: rand.Uint64()}
}

// next returns a fresh payload, valid until the next call; its counter
// makes it unique.
func (g *payloadGen) next() []byte {
	g.n++
	p := g.template
	v := g.n
	for i := g.counter + counterDigits - 1; i >= g.counter; i-- {
		p[i] = byte('0' + v%10)
		v /= 10
	}
	return p
}

func report(w io.Writer, cfg *Config, r *benchResult) error {
	if cfg.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "connections %d, contexts %d, payload %d B\n", r.Conns, r.Contexts, r.PayloadBytes)
	fmt.Fprintf(w, "appends                 %d\n", r.Appends)
	fmt.Fprintf(w, "appends/s               %.0f\n", r.AppendsPerSec)
	fmt.Fprintf(w, "append latency (N conns) p50 %.3f ms  p99 %.3f ms  p999 %.3f ms\n", r.AppendP50Ms, r.AppendP99Ms, r.AppendP999Ms)
	fmt.Fprintf(w, "append latency (1 conn)  p50 %.3f ms  p99 %.3f ms\n", r.SingleConnP50Ms, r.SingleConnP99Ms)
	if r.SingleConnCommitMs > 0 {
		fmt.Fprintf(w, "1-conn group steps      files %.3f ms, statement %.3f ms (in parallel), then COMMIT %.3f ms (server side, mean per group)\n",
			r.SingleConnFilesMs, r.SingleConnStatementMs, r.SingleConnCommitMs)
	}
	fmt.Fprintf(w, "GET_LAST(10, payload)/s %.0f  p50 %.3f ms  p99 %.3f ms (%d conns)\n", r.GetLastPerSec, r.GetLastP50Ms, r.GetLastP99Ms, r.Conns)
	fmt.Fprintf(w, "stored bytes per turn   %.0f\n", r.StoredBytesByTurn)
	fmt.Fprintf(w, "server RSS              %.1f MB (server holds %.0f turns)\n", r.ServerRSSMB, r.ServerTurns)
	fmt.Fprintf(w, "machine                 fdatasync %.3f ms (two files in parallel %.3f ms), durable-flush floor %.3f ms (fdatasync + a Postgres commit), load %s\n",
		r.FdatasyncMs, r.FdatasyncPairMs, r.FlushFloorMs, r.LoadAverage)
	fmt.Fprintf(w, "CPU per append          server %.0f µs, Postgres %.0f µs, this load generator %.0f µs; machine %.0f %% busy (N-conn phase)\n",
		r.ServerCPUUsPerApp, r.PostgresCPUUsPerApp, r.LoadGenCPUUsPerApp, r.MachineBusyPercent)
	if r.AnalyticsDelayP99S > 0 {
		fmt.Fprintf(w, "analytics delay p99     %.3f s (commit to turn_data row, upper bucket bound, since the server started)\n", r.AnalyticsDelayP99S)
	}
	return nil
}
