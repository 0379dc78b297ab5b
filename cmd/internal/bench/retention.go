package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/loadgen"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// RetentionConfig is what RunRetention drives: appends on Conns
// connections measured in alternating windows, with the retention
// sweeper idle and while it deletes SeedContexts expired contexts of
// SeedTurns turns each.
type RetentionConfig struct {
	// Addr and HTTPAddr are the server's binary and HTTP addresses.
	Addr, HTTPAddr string
	// Key is a writer key of a hosted server (of Tenant); empty in dev
	// mode.
	Key string
	// Tenant is the tenant the contexts belong to (the default tenant in
	// dev mode), Label the label of the seeded contexts, which the
	// retention policy the benchmark sets names.
	Tenant, Label string
	// Admin opens the administration of the server's database; the
	// function it returns releases it.
	Admin func(context.Context) (*tenancy.Admin, func(), error)
	// Conns connections append to Contexts contexts of their own,
	// payloads of Size bytes.
	Conns, Contexts, Size int
	// SeedContexts contexts of SeedTurns turns each are seeded on
	// SeedConns connections, and kept at that number before every
	// sweeping window.
	SeedContexts, SeedTurns, SeedConns int
	// Rounds is how many rounds run, each an idle and a sweeping window
	// of Duration, in alternating order.
	Rounds   int
	Duration time.Duration
	// Idle is the idle time of the policy the sweeping windows set on
	// Label.
	Idle time.Duration
	// Wait bounds each wait on the server: for the metadata of the seeded
	// contexts, for the sweeper's first deletion after the policy is set,
	// for the sweeper and the reaper to finish after it is removed.
	Wait time.Duration
	// JSON prints the results as JSON.
	JSON bool

	progress   *cli.Progress
	admin      *tenancy.Admin
	postmaster int
}

// retentionWindow is one measurement of the appends.
type retentionWindow struct {
	Seconds       float64 `json:"seconds"`
	Appends       int64   `json:"appends"`
	AppendsPerSec float64 `json:"appends_per_sec"`
	// The CPU the server and Postgres spent in the window, in all and per
	// append.
	ServerCPUSeconds    float64 `json:"server_cpu_seconds"`
	PostgresCPUSeconds  float64 `json:"postgres_cpu_seconds"`
	ServerCPUUsPerApp   float64 `json:"server_cpu_us_per_append"`
	PostgresCPUUsPerApp float64 `json:"postgres_cpu_us_per_append"`
	MachineBusyPercent  float64 `json:"machine_busy_percent"`
	// What the retention sweeper and the reaper did in the window (zero
	// in an idle window): contexts deleted, turns whose rows went.
	ContextsDeleted int64   `json:"contexts_deleted"`
	TurnsBuried     int64   `json:"turns_buried"`
	ContextsPerSec  float64 `json:"contexts_deleted_per_sec"`
	TurnsPerSec     float64 `json:"turns_buried_per_sec"`
	// SweptThroughout is true when expired contexts were left at the end
	// of a sweeping window: the sweeper worked during all of it.
	SweptThroughout bool `json:"swept_throughout,omitempty"`
}

// retentionRound is one idle and one sweeping window.
type retentionRound struct {
	SweepingFirst bool            `json:"sweeping_first"`
	Idle          retentionWindow `json:"idle"`
	Sweeping      retentionWindow `json:"sweeping"`
	SlowdownPct   float64         `json:"slowdown_pct"`
	// CPUUsPerDeletedTurn is the CPU (server and Postgres) the sweeping
	// window spent beyond what its appends cost at the idle window's
	// rate, per turn buried.
	CPUUsPerDeletedTurn float64 `json:"cpu_us_per_deleted_turn"`
	// StartSeconds is how long the sweeper took to begin after the policy
	// was set (its --sweep-interval), outside the window.
	StartSeconds float64 `json:"sweeper_start_seconds"`
}

// retentionResult is what RunRetention reports.
type retentionResult struct {
	Conns        int              `json:"conns"`
	Contexts     int              `json:"contexts"`
	PayloadBytes int              `json:"payload_bytes"`
	SeedContexts int              `json:"seed_contexts"`
	SeedTurns    int              `json:"seed_turns_per_context"`
	SeededTurns  int64            `json:"seeded_turns"`
	SeedPerSec   float64          `json:"seed_turns_per_sec"`
	Rounds       []retentionRound `json:"rounds"`

	MedianIdle             float64 `json:"median_idle_appends_per_sec"`
	MedianSweeping         float64 `json:"median_sweeping_appends_per_sec"`
	MedianSlowdownPct      float64 `json:"median_slowdown_pct"`
	MedianContextsPerSec   float64 `json:"median_contexts_deleted_per_sec"`
	MedianTurnsPerSec      float64 `json:"median_turns_buried_per_sec"`
	MedianCPUUsPerTurn     float64 `json:"median_cpu_us_per_deleted_turn"`
	MedianIdleCPUUsPerApp  float64 `json:"median_idle_cpu_us_per_append"`
	MedianSweepCPUUsPerApp float64 `json:"median_sweeping_cpu_us_per_append"`
	LoadAverageStart       string  `json:"load_average_start"`
	LoadAverageEnd         string  `json:"load_average_end"`
	// FinishedEarly counts the sweeping windows the sweeper finished
	// before they ended.
	FinishedEarly int `json:"sweeping_windows_finished_early"`
}

// RunRetention benchmarks the retention sweeper beside appends: it seeds
// cfg.SeedContexts contexts labelled cfg.Label, then measures appends on
// cfg.Conns connections in cfg.Rounds rounds of two windows in alternating
// order: idle (no policy expires anything) and sweeping (a policy of the
// tenant's on the label, set as `cardbox tenant retention` sets it,
// expires the seeded contexts, which the server's retention sweeper
// deletes and its reaper buries). What a sweeping window consumed is
// seeded again before the next, outside the windows. It prints each
// window on stderr and the medians on stdout.
func RunRetention(ctx context.Context, cfg RetentionConfig, stdout, stderr io.Writer) error {
	cfg.progress = cli.NewProgress(stderr)
	admin, release, err := cfg.Admin(ctx)
	if err != nil {
		return err
	}
	defer release()
	cfg.admin = admin
	return benchRetention(ctx, &cfg, stdout, stderr)
}

// benchActor is who the audit log names for the policies the benchmark
// sets and removes.
const benchActor = "cardbox bench-retention"

func benchRetention(ctx context.Context, cfg *RetentionConfig, stdout, stderr io.Writer) error {
	res := &retentionResult{
		Conns: cfg.Conns, Contexts: cfg.Contexts, PayloadBytes: cfg.Size,
		SeedContexts: cfg.SeedContexts, SeedTurns: cfg.SeedTurns, LoadAverageStart: loadAverage(),
	}
	// No policy on the label until a sweeping window sets one.
	if err := cfg.admin.ClearRetention(ctx, benchActor, cfg.Tenant, cfg.Label); err != nil {
		return err
	}
	p, err := cfg.admin.RetentionProgressOf(ctx, cfg.Tenant, cfg.Label)
	if err != nil {
		return err
	}
	cfg.postmaster = parentPID(p.BackendPID)
	if cfg.postmaster == 0 {
		cfg.warnf(stderr, "Postgres's processes are not on this machine (or not readable): its CPU is not reported")
	}
	cfg.progress.Show("creating %d contexts on %s", cfg.Contexts, cfg.Addr)
	appendCtxs, err := contextsOf(ctx, cfg.Addr, cfg.Key, cfg.Contexts)
	if err != nil {
		return err
	}
	conns, err := dialAll(ctx, cfg.Addr, cfg.Key, cfg.Conns)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if err := cfg.topUp(ctx, res); err != nil {
		return err
	}
	for i := range cfg.Rounds {
		r := retentionRound{SweepingFirst: i%2 == 1}
		idle := func() error {
			if err := cfg.waitQuiet(ctx); err != nil {
				return err
			}
			cfg.progress.Show("round %d of %d: idle window (%v)", i+1, cfg.Rounds, cfg.Duration)
			w, err := cfg.window(ctx, conns, appendCtxs, false)
			r.Idle = w
			return err
		}
		sweeping := func() error {
			// The contexts of the last sweeping window's batch go
			// before the count of what to seed again.
			if err := cfg.waitQuiet(ctx); err != nil {
				return err
			}
			if err := cfg.topUp(ctx, res); err != nil {
				return err
			}
			var err error
			r.Sweeping, r.StartSeconds, err = cfg.sweepingWindow(ctx, conns, appendCtxs, i)
			return err
		}
		phases := []func() error{idle, sweeping}
		if r.SweepingFirst {
			slices.Reverse(phases)
		}
		for _, ph := range phases {
			if err := ph(); err != nil {
				return fmt.Errorf("round %d: %w", i+1, err)
			}
		}
		r.summarize()
		res.Rounds = append(res.Rounds, r)
		cfg.progress.Done("")
		fmt.Fprintf(stderr, "round %d: idle %.0f appends/s, sweeping %.0f/s (%.1f%% slower); sweeper %.0f contexts/s, %.0f turns/s; %.0f µs CPU per deleted turn%s\n",
			i+1, r.Idle.AppendsPerSec, r.Sweeping.AppendsPerSec, r.SlowdownPct, r.Sweeping.ContextsPerSec, r.Sweeping.TurnsPerSec,
			r.CPUUsPerDeletedTurn, finishedEarly(r.Sweeping))
	}
	if err := cfg.waitQuiet(ctx); err != nil {
		return err
	}
	cfg.progress.Done("")
	res.LoadAverageEnd = loadAverage()
	res.summarize()
	if cfg.JSON {
		return reportRetentionJSON(stdout, res)
	}
	return reportRetention(stdout, res)
}

func finishedEarly(w retentionWindow) string {
	if w.SweptThroughout {
		return ""
	}
	return " (the sweeper finished before the window ended: seed more contexts or shorten --duration)"
}

func (c *RetentionConfig) warnf(w io.Writer, format string, args ...any) {
	c.progress.Done("")
	fmt.Fprintf(w, "cardbox bench-retention: "+format+"\n", args...)
}

// topUp seeds labelled contexts until cfg.SeedContexts live ones are
// there, and waits until the server has read the metadata of all of them
// and they have been idle for the policy's idle time.
func (c *RetentionConfig) topUp(ctx context.Context, res *retentionResult) error {
	p, err := c.admin.RetentionProgressOf(ctx, c.Tenant, c.Label)
	if err != nil {
		return err
	}
	missing := c.SeedContexts - int(p.LabelledLive)
	if missing <= 0 {
		return nil
	}
	start := time.Now()
	turns, err := c.seed(ctx, missing)
	if err != nil {
		return err
	}
	res.SeededTurns += turns
	if s := time.Since(start).Seconds(); s > 0 && res.SeedPerSec == 0 {
		res.SeedPerSec = float64(turns) / s
	}
	done := time.Now()
	if err := c.waitFor(ctx, "the server to read the seeded contexts' metadata", func(p tenancy.RetentionProgress) bool {
		return p.LabelledLive >= int64(c.SeedContexts)
	}); err != nil {
		return err
	}
	// Every seeded context idle for longer than the policy's idle time.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(done.Add(c.Idle + time.Second))):
	}
	return nil
}

// seed creates n contexts labelled c.Label with c.SeedTurns turns each,
// on c.SeedConns connections, and returns the turns appended.
func (c *RetentionConfig) seed(ctx context.Context, n int) (int64, error) {
	var next, contexts, turns atomic.Int64
	start := time.Now()
	stop := c.progress.Every(250*time.Millisecond, func() string {
		return fmt.Sprintf("seeding %d contexts of %d turns: %d contexts, %d turns, %.0f turns/s",
			n, c.SeedTurns, contexts.Load(), turns.Load(), float64(turns.Load())/max(time.Since(start).Seconds(), 0.001))
	})
	defer stop()
	err := onConns(ctx, c.Addr, c.Key, min(c.SeedConns, n), func(i int, conn *loadgen.Conn) error {
		gen := newPayloadGen(c.Size, uint64(1<<40+i))
		first := firstTurnGen{label: c.Label, text: string(gen.next())}
		for next.Add(1) <= int64(n) {
			id, err := conn.CreateContext()
			if err != nil {
				return fmt.Errorf("seed: create context: %w", err)
			}
			for t := range c.SeedTurns {
				p := gen.next()
				if t == 0 {
					p = first.next()
				}
				if err := conn.AppendTurn(id, p); err != nil {
					return fmt.Errorf("seed: append: %w", err)
				}
				turns.Add(1)
			}
			contexts.Add(1)
		}
		return nil
	})
	return turns.Load(), err
}

// firstTurnGen makes the first turns of seeded contexts: conversation
// items whose context metadata (tag 30) carries the label, each unique.
type firstTurnGen struct {
	label, text string
	n           uint64
}

func (g *firstTurnGen) next() []byte {
	g.n++
	b, _ := msgpack.Marshal(map[string]any{
		"1": "user_input", "3": int64(1700000000000),
		"10": map[string]any{"1": strconv.FormatUint(g.n, 10) + " " + g.text},
		"30": map[string]any{"1": "cardbox-bench", "3": []string{g.label}},
	})
	return b
}

// sweepingWindow sets the policy that expires the seeded contexts, waits
// for the sweeper's first deletion, measures a window and removes the
// policy.
func (c *RetentionConfig) sweepingWindow(ctx context.Context, conns []*loadgen.Conn, appendCtxs []uint64, round int) (retentionWindow, float64, error) {
	before, err := c.admin.RetentionProgressOf(ctx, c.Tenant, c.Label)
	if err != nil {
		return retentionWindow{}, 0, err
	}
	set := time.Now()
	err = c.admin.SetRetention(ctx, benchActor, tenancy.Retention{TenantID: c.Tenant, Label: c.Label, Idle: c.Idle})
	if err != nil {
		return retentionWindow{}, 0, err
	}
	cleared := false
	defer func() {
		// Removed whatever happened: the sweeper stops after its batch.
		if !cleared {
			_ = c.admin.ClearRetention(context.WithoutCancel(ctx), benchActor, c.Tenant, c.Label)
		}
	}()
	c.progress.Show("round %d of %d: waiting for the retention sweeper (its --sweep-interval)", round+1, c.Rounds)
	if err := c.waitFor(ctx, "the retention sweeper's first deletion", func(p tenancy.RetentionProgress) bool {
		return p.Deleted > before.Deleted
	}); err != nil {
		return retentionWindow{}, 0, err
	}
	started := time.Since(set).Seconds()
	c.progress.Show("round %d of %d: sweeping window (%v)", round+1, c.Rounds, c.Duration)
	w, err := c.window(ctx, conns, appendCtxs, true)
	if err != nil {
		return w, started, err
	}
	cleared = true
	return w, started, c.admin.ClearRetention(ctx, benchActor, c.Tenant, c.Label)
}

// window measures appends on conns for c.Duration, with the CPU the
// server and Postgres spent; with sweeping, also what the sweeper and the
// reaper did.
func (c *RetentionConfig) window(ctx context.Context, conns []*loadgen.Conn, appendCtxs []uint64, sweeping bool) (retentionWindow, error) {
	var w retentionWindow
	var p0 tenancy.RetentionProgress
	var err error
	if sweeping {
		if p0, err = c.admin.RetentionProgressOf(ctx, c.Tenant, c.Label); err != nil {
			return w, err
		}
	}
	m0, err := scrapeMetrics(ctx, c.HTTPAddr)
	if err != nil {
		return w, fmt.Errorf("server metrics: %w", err)
	}
	pg0, ticks0 := treeCPU(c.postmaster), machineTicks()
	start := time.Now()
	n, err := appendFor(ctx, conns, appendCtxs, c.Size, c.Duration)
	elapsed := time.Since(start)
	if err != nil {
		return w, err
	}
	m1, err := scrapeMetrics(ctx, c.HTTPAddr)
	if err != nil {
		return w, fmt.Errorf("server metrics: %w", err)
	}
	pg1 := treeCPU(c.postmaster)
	w.Seconds, w.Appends = elapsed.Seconds(), n
	w.AppendsPerSec = float64(n) / w.Seconds
	w.MachineBusyPercent = machineTicks().busyPercentSince(ticks0)
	w.ServerCPUSeconds = m1["process_cpu_seconds_total"] - m0["process_cpu_seconds_total"]
	w.PostgresCPUSeconds = (pg1 - pg0).Seconds()
	if n > 0 {
		w.ServerCPUUsPerApp = w.ServerCPUSeconds * 1e6 / float64(n)
		w.PostgresCPUUsPerApp = w.PostgresCPUSeconds * 1e6 / float64(n)
	}
	if sweeping {
		p1, err := c.admin.RetentionProgressOf(ctx, c.Tenant, c.Label)
		if err != nil {
			return w, err
		}
		w.ContextsDeleted = p1.Deleted - p0.Deleted
		// Turns whose rows went: the server's turns grew by the appends
		// less them.
		w.TurnsBuried = n - int64(m1["cardbox_turns"]-m0["cardbox_turns"])
		w.ContextsPerSec = float64(w.ContextsDeleted) / w.Seconds
		w.TurnsPerSec = float64(w.TurnsBuried) / w.Seconds
		w.SweptThroughout = p1.LabelledLive > 0
	}
	return w, nil
}

// appendFor appends on every connection, connection i to appendCtxs[i %
// len], one request in flight on each, for d; it returns the appends.
func appendFor(ctx context.Context, conns []*loadgen.Conn, appendCtxs []uint64, size int, d time.Duration) (int64, error) {
	var count atomic.Int64
	deadline := time.Now().Add(d)
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Go(func() {
			gen := newPayloadGen(size, uint64(i))
			id := appendCtxs[i%len(appendCtxs)]
			for time.Now().Before(deadline) {
				if err := conn.AppendTurn(id, gen.next()); err != nil {
					errs[i] = fmt.Errorf("append: %w", err)
					return
				}
				count.Add(1)
			}
		})
	}
	wg.Wait()
	return count.Load(), errors.Join(errs...)
}

// quietFor is how long no context may be deleted for the sweeper to
// count as done: longer than it rests between two batches of a pass
// (--retention-share), which goes on through the contexts it listed
// before the policy was removed.
const quietFor = 10 * time.Second

// waitQuiet waits until no policy expires the seeded contexts any more
// and the sweeper and the reaper are done: nothing left unreaped, and no
// deletion for quietFor.
func (c *RetentionConfig) waitQuiet(ctx context.Context) error {
	last, since := int64(-1), time.Now()
	return c.waitFor(ctx, "the retention sweeper and the reaper to finish", func(p tenancy.RetentionProgress) bool {
		if p.Deleted != last || p.Unreaped > 0 {
			last, since = p.Deleted, time.Now()
		}
		return time.Since(since) >= quietFor
	})
}

// waitFor polls the tenant's contexts until done says so, for at most
// c.Wait.
func (c *RetentionConfig) waitFor(ctx context.Context, what string, done func(tenancy.RetentionProgress) bool) error {
	deadline := time.Now().Add(c.Wait)
	for {
		p, err := c.admin.RetentionProgressOf(ctx, c.Tenant, c.Label)
		if err != nil {
			return err
		}
		if done(p) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %v for %s (labelled live contexts %d, deleted %d, unreaped %d): is the server's --sweep-interval short (1s)?",
				c.Wait, what, p.LabelledLive, p.Deleted, p.Unreaped)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// dialAll dials n connections.
func dialAll(ctx context.Context, addr, key string, n int) ([]*loadgen.Conn, error) {
	conns := make([]*loadgen.Conn, 0, n)
	for range n {
		c, err := loadgen.Dial(ctx, addr, key)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, fmt.Errorf("connect to %s: %w", addr, err)
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// parentPID is the parent of process pid (0 when unknown).
func parentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := statFields(string(b))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// statFields are the fields of /proc/PID/stat after the command name:
// state, ppid, ...
func statFields(s string) []string {
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return nil
	}
	return strings.Fields(s[end+1:])
}

// treeCPU is the CPU time (user and system) of process root and of its
// children: a Postgres cluster's postmaster and its backends and workers
// (0 when root is 0).
func treeCPU(root int) time.Duration {
	if root == 0 {
		return 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended
		}
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, "/proc/"), "/stat"))
		f := statFields(string(b))
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); pid != root && ppid != root {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64) // utime
		k, _ := strconv.ParseInt(f[12], 10, 64) // stime
		ticks += u + k
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

func (r *retentionRound) summarize() {
	if r.Idle.AppendsPerSec > 0 {
		r.SlowdownPct = 100 * (1 - r.Sweeping.AppendsPerSec/r.Idle.AppendsPerSec)
	}
	if r.Sweeping.TurnsBuried > 0 && r.Idle.Appends > 0 {
		perAppend := (r.Idle.ServerCPUSeconds + r.Idle.PostgresCPUSeconds) / float64(r.Idle.Appends)
		extra := r.Sweeping.ServerCPUSeconds + r.Sweeping.PostgresCPUSeconds - perAppend*float64(r.Sweeping.Appends)
		r.CPUUsPerDeletedTurn = extra * 1e6 / float64(r.Sweeping.TurnsBuried)
	}
}

func (res *retentionResult) summarize() {
	col := func(f func(retentionRound) float64) float64 {
		v := make([]float64, len(res.Rounds))
		for i, r := range res.Rounds {
			v[i] = f(r)
		}
		return median(v)
	}
	res.MedianIdle = col(func(r retentionRound) float64 { return r.Idle.AppendsPerSec })
	res.MedianSweeping = col(func(r retentionRound) float64 { return r.Sweeping.AppendsPerSec })
	res.MedianSlowdownPct = col(func(r retentionRound) float64 { return r.SlowdownPct })
	res.MedianContextsPerSec = col(func(r retentionRound) float64 { return r.Sweeping.ContextsPerSec })
	res.MedianTurnsPerSec = col(func(r retentionRound) float64 { return r.Sweeping.TurnsPerSec })
	res.MedianCPUUsPerTurn = col(func(r retentionRound) float64 { return r.CPUUsPerDeletedTurn })
	res.MedianIdleCPUUsPerApp = col(func(r retentionRound) float64 { return r.Idle.ServerCPUUsPerApp + r.Idle.PostgresCPUUsPerApp })
	res.MedianSweepCPUUsPerApp = col(func(r retentionRound) float64 {
		return r.Sweeping.ServerCPUUsPerApp + r.Sweeping.PostgresCPUUsPerApp
	})
	for _, r := range res.Rounds {
		if !r.Sweeping.SweptThroughout {
			res.FinishedEarly++
		}
	}
}

func reportRetention(w io.Writer, res *retentionResult) error {
	fmt.Fprintf(w, "connections %d, contexts %d, payload %d B; seeded contexts %d of %d turns (%d turns seeded, %.0f turns/s)\n",
		res.Conns, res.Contexts, res.PayloadBytes, res.SeedContexts, res.SeedTurns, res.SeededTurns, res.SeedPerSec)
	fmt.Fprintf(w, "appends/s, median of %d rounds: sweeper idle %.0f, sweeping %.0f (median slowdown %.1f%%)\n",
		len(res.Rounds), res.MedianIdle, res.MedianSweeping, res.MedianSlowdownPct)
	fmt.Fprintf(w, "sweeper (median): %.0f contexts deleted/s, %.0f turns buried/s, %.0f µs CPU (server and Postgres) per deleted turn\n",
		res.MedianContextsPerSec, res.MedianTurnsPerSec, res.MedianCPUUsPerTurn)
	fmt.Fprintf(w, "CPU per append (server and Postgres, median): idle %.0f µs, sweeping %.0f µs\n",
		res.MedianIdleCPUUsPerApp, res.MedianSweepCPUUsPerApp)
	if res.FinishedEarly > 0 {
		fmt.Fprintf(w, "warning: in %d sweeping windows the sweeper finished before the window ended: seed more contexts or shorten --duration\n",
			res.FinishedEarly)
	}
	fmt.Fprintf(w, "load average: %s at the start, %s at the end\n", res.LoadAverageStart, res.LoadAverageEnd)
	return nil
}

// reportRetentionJSON prints res as JSON.
func reportRetentionJSON(w io.Writer, res *retentionResult) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
