package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/loadgen"
)

// TenantsConfig is what RunTenants drives: a victim tenant's appends
// measured alone and beside a noisy tenant that appends as fast as it
// can, far over its rate limit, ignoring every 429.
type TenantsConfig struct {
	// Addr is the server's binary address.
	Addr string
	// VictimKey and NoisyKey are writer keys of two tenants of a hosted
	// server: the one measured and the one hammering.
	VictimKey, NoisyKey string
	// Conns victim and NoisyConns noisy connections append in parallel,
	// payloads of Size bytes.
	Conns, NoisyConns, Size int
	// Rounds is how many A/B rounds run, each measurement Duration long.
	Rounds   int
	Duration time.Duration
	// JSON prints the results as JSON.
	JSON bool

	victimCtxs, noisyCtxs []uint64
}

// tenantsRound is one A/B round.
type tenantsRound struct {
	AloneAppendsPerSec  float64 `json:"victim_alone_appends_per_sec"`
	BesideAppendsPerSec float64 `json:"victim_beside_noisy_appends_per_sec"`
	SlowdownPct         float64 `json:"slowdown_pct"`
	NoisyAcceptedPerSec float64 `json:"noisy_accepted_per_sec"`
	NoisyRefusedPerSec  float64 `json:"noisy_refused_429_per_sec"`
}

// tenantsResult is what RunTenants reports: every round and the
// medians.
type tenantsResult struct {
	Rounds              []tenantsRound `json:"rounds"`
	MedianAlone         float64        `json:"median_victim_alone_appends_per_sec"`
	MedianBeside        float64        `json:"median_victim_beside_noisy_appends_per_sec"`
	MedianSlowdownPct   float64        `json:"median_slowdown_pct"`
	MedianNoisyAccepted float64        `json:"median_noisy_accepted_per_sec"`
	MedianNoisyRefused  float64        `json:"median_noisy_refused_429_per_sec"`
}

// RunTenants runs cfg.Rounds A/B rounds against a hosted server: the
// victim tenant's appends alone, and beside the noisy tenant. It prints
// each round's figures and its progress on stderr and the medians on
// stdout.
func RunTenants(ctx context.Context, cfg TenantsConfig, stdout, stderr io.Writer) error {
	return benchTenants(ctx, &cfg, stdout, stderr)
}

func benchTenants(ctx context.Context, cfg *TenantsConfig, stdout, stderr io.Writer) error {
	progress := cli.NewProgress(stderr)
	progress.Show("creating contexts on %s", cfg.Addr)
	var err error
	if cfg.victimCtxs, err = contextsOf(ctx, cfg.Addr, cfg.VictimKey, cfg.Conns); err != nil {
		return fmt.Errorf("victim: %w", err)
	}
	if cfg.noisyCtxs, err = contextsOf(ctx, cfg.Addr, cfg.NoisyKey, cfg.NoisyConns); err != nil {
		return fmt.Errorf("noisy tenant: %w", err)
	}
	res := &tenantsResult{}
	for i := range cfg.Rounds {
		progress.Show("round %d of %d (%v per measurement, two measurements)", i+1, cfg.Rounds, cfg.Duration)
		r, err := tenantsABRound(ctx, cfg, i%2 == 1)
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
		res.Rounds = append(res.Rounds, r)
		progress.Done(fmt.Sprintf("round %d: alone %.0f/s, beside noisy %.0f/s (%.1f%% slower); noisy accepted %.0f/s, refused %.0f/s",
			i+1, r.AloneAppendsPerSec, r.BesideAppendsPerSec, r.SlowdownPct, r.NoisyAcceptedPerSec, r.NoisyRefusedPerSec))
	}
	res.summarize()
	return reportTenants(stdout, cfg, res)
}

// tenantsABRound measures the victim alone and beside the noisy tenant;
// noisyFirst alternates the order between rounds, so drift in the
// machine's speed does not favour one side.
func tenantsABRound(ctx context.Context, cfg *TenantsConfig, noisyFirst bool) (tenantsRound, error) {
	var r tenantsRound
	alone := func() (err error) { r.AloneAppendsPerSec, err = victimPhase(ctx, cfg); return err }
	beside := func() error {
		noisyCtx, stop := context.WithCancel(ctx)
		var accepted, refused atomic.Int64
		var noisyErr error
		var wg sync.WaitGroup
		wg.Go(func() { noisyErr = hammer(noisyCtx, cfg, &accepted, &refused) })
		start := time.Now()
		var err error
		r.BesideAppendsPerSec, err = victimPhase(ctx, cfg)
		elapsed := time.Since(start).Seconds()
		stop()
		wg.Wait()
		r.NoisyAcceptedPerSec, r.NoisyRefusedPerSec = float64(accepted.Load())/elapsed, float64(refused.Load())/elapsed
		return errors.Join(err, noisyErr)
	}
	phases := []func() error{alone, beside}
	if noisyFirst {
		slices.Reverse(phases)
	}
	for _, p := range phases {
		if err := p(); err != nil {
			return r, err
		}
	}
	r.SlowdownPct = 100 * (1 - r.BesideAppendsPerSec/r.AloneAppendsPerSec)
	return r, nil
}

// victimPhase appends on cfg.Conns connections, each to its own context,
// for cfg.Duration, and returns appends per second.
func victimPhase(ctx context.Context, cfg *TenantsConfig) (float64, error) {
	var count atomic.Int64
	deadline := time.Now().Add(cfg.Duration)
	start := time.Now()
	err := onConns(ctx, cfg.Addr, cfg.VictimKey, cfg.Conns, func(i int, c *loadgen.Conn) error {
		gen := newPayloadGen(cfg.Size, uint64(i))
		for time.Now().Before(deadline) {
			if err := c.AppendTurn(cfg.victimCtxs[i], gen.next()); err != nil {
				return fmt.Errorf("victim append: %w", err)
			}
			count.Add(1)
		}
		return nil
	})
	return float64(count.Load()) / time.Since(start).Seconds(), err
}

// hammer appends as fast as it can on cfg.NoisyConns connections until
// ctx ends, counting appends accepted and refused with 429.
func hammer(ctx context.Context, cfg *TenantsConfig, accepted, refused *atomic.Int64) error {
	return onConns(ctx, cfg.Addr, cfg.NoisyKey, cfg.NoisyConns, func(i int, c *loadgen.Conn) error {
		gen := newPayloadGen(cfg.Size, uint64(1000+i))
		for ctx.Err() == nil {
			err := c.AppendTurn(cfg.noisyCtxs[i], gen.next())
			var se *loadgen.ServerError
			switch {
			case err == nil:
				accepted.Add(1)
			case errors.As(err, &se) && se.Code == 429:
				refused.Add(1)
			case ctx.Err() != nil:
				return nil // the connection was closed to stop it
			default:
				return fmt.Errorf("noisy append: %w", err)
			}
		}
		return nil
	})
}

// onConns dials n connections with key and runs fn on each in parallel.
func onConns(ctx context.Context, addr, key string, n int, fn func(int, *loadgen.Conn) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			c, err := loadgen.Dial(ctx, addr, key)
			if err != nil {
				errs[i] = fmt.Errorf("connect to %s: %w", addr, err)
				return
			}
			defer c.Close()
			errs[i] = fn(i, c)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// contextsOf creates n contexts with key.
func contextsOf(ctx context.Context, addr, key string, n int) ([]uint64, error) {
	c, err := loadgen.Dial(ctx, addr, key)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	defer c.Close()
	ids := make([]uint64, n)
	for i := range ids {
		if ids[i], err = c.CreateContext(); err != nil {
			return nil, fmt.Errorf("create context: %w", err)
		}
	}
	return ids, nil
}

func (res *tenantsResult) summarize() {
	col := func(f func(tenantsRound) float64) float64 {
		v := make([]float64, len(res.Rounds))
		for i, r := range res.Rounds {
			v[i] = f(r)
		}
		return median(v)
	}
	res.MedianAlone = col(func(r tenantsRound) float64 { return r.AloneAppendsPerSec })
	res.MedianBeside = col(func(r tenantsRound) float64 { return r.BesideAppendsPerSec })
	res.MedianSlowdownPct = col(func(r tenantsRound) float64 { return r.SlowdownPct })
	res.MedianNoisyAccepted = col(func(r tenantsRound) float64 { return r.NoisyAcceptedPerSec })
	res.MedianNoisyRefused = col(func(r tenantsRound) float64 { return r.NoisyRefusedPerSec })
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func reportTenants(w io.Writer, cfg *TenantsConfig, res *tenantsResult) error {
	if cfg.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(w, "victim appends/s, median of %d rounds: alone %.0f, beside the noisy tenant %.0f (median slowdown %.1f%%)\n",
		len(res.Rounds), res.MedianAlone, res.MedianBeside, res.MedianSlowdownPct)
	fmt.Fprintf(w, "noisy tenant: %.0f appends/s accepted, %.0f/s refused with 429 (median)\n", res.MedianNoisyAccepted, res.MedianNoisyRefused)
	return nil
}
