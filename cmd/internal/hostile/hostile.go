// Package hostile runs the attacks of careless and hostile clients
// against a running cardboxd, all at once and bounded in time, and checks
// that the server survives them: it keeps answering, stored turns and
// cards do not change, its resident memory stays within a bound, and a
// well-behaved client's GET_HEAD stays fast. It drives loopback servers
// only (the memory bound is read from /proc).
package hostile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Target is a running cardboxd.
type Target struct {
	BinaryAddr, HTTPAddr string
	// PID is the server's process id, for its resident memory; 0 skips
	// the memory check.
	PID int
}

// Options size the attacks. Zero fields take the defaults of Defaults.
type Options struct {
	// Duration is how long the attacks run.
	Duration time.Duration
	// IdleConns is how many idle connections are opened to each listener.
	IdleConns int
	// PartialFrames connections each send PartialBytes of a 64 MiB frame
	// and stall.
	PartialFrames, PartialBytes int
	// Pipeliners connections each pipeline Pipelined GET_LAST requests
	// for about ReplyBytes each and never read the answers.
	Pipeliners, Pipelined, ReplyBytes int
	// SlowBodies HTTP requests trickle their body at one byte a second.
	SlowBodies int
	// MaxRSSGrowth bounds the server's resident memory above its level
	// before the attacks.
	MaxRSSGrowth int64
	// MaxHeadP99 bounds the good client's GET_HEAD latency.
	MaxHeadP99 time.Duration
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
}

// Defaults are the attacks as docs/performance.md ("Hostile clients")
// measures them.
var Defaults = Options{
	Duration: 20 * time.Second, IdleConns: 2000,
	PartialFrames: 16, PartialBytes: 48 << 20,
	Pipeliners: 2, Pipelined: 64, ReplyBytes: 10 << 20,
	SlowBodies: 16, MaxRSSGrowth: 250 << 20, MaxHeadP99: 50 * time.Millisecond,
}

// Report is what a run saw.
type Report struct {
	BaselineRSS, PeakRSS int64
	Heads                int
	HeadP50, HeadP99     time.Duration
	// Failures say what broke; empty when the server survived.
	Failures []string
}

// Run sets up data, runs every attack at once for opts.Duration while a
// good client measures GET_HEAD, then checks the server.
func Run(ctx context.Context, t Target, opts Options) (Report, error) {
	opts = withDefaults(opts)
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	before, err := setUp(ctx, t, opts)
	if err != nil {
		return Report{}, fmt.Errorf("set up: %w", err)
	}
	var r Report
	if r.BaselineRSS, err = rss(t.PID); err != nil {
		return r, err
	}
	logf("attacking for %v: %d idle connections per listener, %d partial frames, %d pipeliners, %d slow bodies",
		opts.Duration, opts.IdleConns, opts.PartialFrames, opts.Pipeliners, opts.SlowBodies)
	latencies, peak, attackErr := attack(ctx, t, opts, before)
	r.PeakRSS = peak
	r.Heads = len(latencies)
	r.HeadP50, r.HeadP99 = percentile(latencies, 50), percentile(latencies, 99)
	if attackErr != nil {
		r.Failures = append(r.Failures, attackErr.Error())
	}
	r.Failures = append(r.Failures, judge(r, t, opts)...)
	if err := before.verify(ctx, t); err != nil {
		r.Failures = append(r.Failures, err.Error())
	}
	return r, nil
}

// attack runs the attackers and the good client until opts.Duration ends,
// sampling the server's memory; it returns the good client's latencies and
// the peak memory.
func attack(ctx context.Context, t Target, opts Options, d *dataset) ([]time.Duration, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.Duration)
	defer cancel()
	attackers := []func(context.Context, Target, Options, *dataset){
		idleBinary, idleHTTP, partialFrames, pipeline, slowBodies,
	}
	var wg sync.WaitGroup
	for _, a := range attackers {
		wg.Go(func() { a(ctx, t, opts, d) })
	}
	var peak int64
	wg.Go(func() { peak = samplePeak(ctx, t.PID) })
	latencies, err := goodClient(ctx, t, d)
	cancel()
	wg.Wait()
	return latencies, peak, err
}

// judge checks the bounds.
func judge(r Report, t Target, opts Options) []string {
	var out []string
	if t.PID != 0 && r.PeakRSS-r.BaselineRSS > opts.MaxRSSGrowth {
		out = append(out, fmt.Sprintf("resident memory grew by %d MiB (from %d MiB to %d MiB), over the bound of %d MiB",
			(r.PeakRSS-r.BaselineRSS)>>20, r.BaselineRSS>>20, r.PeakRSS>>20, opts.MaxRSSGrowth>>20))
	}
	if r.Heads == 0 {
		out = append(out, "the good client completed no GET_HEAD")
	} else if r.HeadP99 > opts.MaxHeadP99 {
		out = append(out, fmt.Sprintf("GET_HEAD p99 %v over the bound of %v (%d requests, p50 %v)", r.HeadP99, opts.MaxHeadP99, r.Heads, r.HeadP50))
	}
	return out
}

// Print writes on w what the run saw (the server's memory, the good
// client's GET_HEAD latency) and whether the server survived, and returns
// what broke as an error, nil when it survived.
func (r Report) Print(w io.Writer) error {
	fmt.Fprintf(w, "server RSS: %d MiB before, %d MiB peak (+%d MiB)\n", r.BaselineRSS>>20, r.PeakRSS>>20, (r.PeakRSS-r.BaselineRSS)>>20)
	fmt.Fprintf(w, "good client GET_HEAD: %d requests, p50 %v, p99 %v\n", r.Heads, r.HeadP50.Round(time.Microsecond), r.HeadP99.Round(time.Microsecond))
	if err := r.Err(); err != nil {
		return fmt.Errorf("the server did not survive the attacks:\n%w", err)
	}
	fmt.Fprintln(w, "survived: every answer, stored turn and card intact, within the bounds")
	return nil
}

// Err returns the failures as one error, nil when there are none.
func (r Report) Err() error {
	if len(r.Failures) == 0 {
		return nil
	}
	errs := make([]error, len(r.Failures))
	for i, f := range r.Failures {
		errs[i] = errors.New(f)
	}
	return errors.Join(errs...)
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func withDefaults(o Options) Options {
	def := Defaults
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if o.Duration == 0 {
		o.Duration = def.Duration
	}
	set(&o.IdleConns, def.IdleConns)
	set(&o.PartialFrames, def.PartialFrames)
	set(&o.PartialBytes, def.PartialBytes)
	set(&o.Pipeliners, def.Pipeliners)
	set(&o.Pipelined, def.Pipelined)
	set(&o.ReplyBytes, def.ReplyBytes)
	set(&o.SlowBodies, def.SlowBodies)
	if o.MaxRSSGrowth == 0 {
		o.MaxRSSGrowth = def.MaxRSSGrowth
	}
	if o.MaxHeadP99 == 0 {
		o.MaxHeadP99 = def.MaxHeadP99
	}
	return o
}
