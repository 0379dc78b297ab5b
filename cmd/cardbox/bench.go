package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/bench"
	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// benchSettings are the settings `cardbox bench` reads: the server's
// addresses, and its data directory and database for the flush probes.
var benchSettings = append([]string{"binary-addr", "http-addr"}, dbSettings...)

// benchCommand is `cardbox bench` (package bench, Run).
func benchCommand() *cli.Command {
	return &cli.Command{
		Name: "bench", Settings: benchSettings,
		Purpose: "Benchmark a running cardboxd over the CXDB binary protocol: appends on N connections, one connection's append latency, GET_LAST; progress on a terminal.",
		Env:     map[string]string{"key": "CARDBOX_KEY"},
		Rules: map[string]config.Rule{
			"conns": config.Positive, "contexts": config.Positive, "size": config.Positive, "duration": config.Positive,
			"turns": config.NonNegative, "read-duration": config.NonNegative, "latency-turns": config.NonNegative, "rate": config.NonNegative,
		},
		Setup: func(fs *flag.FlagSet) cli.Action {
			var c bench.Config
			fs.IntVar(&c.Conns, "conns", 64, "connections appending in parallel (N)")
			fs.IntVar(&c.Contexts, "contexts", 64, "contexts the appends spread over (M)")
			fs.IntVar(&c.Size, "size", 1024, "payload size in bytes (S)")
			fs.IntVar(&c.Turns, "turns", 0, "stop the append phase after this many turns (0: run for --duration)")
			fs.DurationVar(&c.Duration, "duration", 10*time.Second, "length of the append phase when --turns is 0")
			fs.DurationVar(&c.ReadDuration, "read-duration", 5*time.Second, "length of the GET_LAST phase")
			fs.IntVar(&c.LatencyTurns, "latency-turns", 2000, "appends on one connection to measure single-writer latency")
			fs.BoolVar(&c.JSON, "json", false, "print the results as JSON")
			fs.BoolVar(&c.IdempotencyKeys, "idempotency-keys", false, "send every append of the append phase with an idempotency key of its own (a random UUID, as clients send), which the server keeps for 24 h")
			fs.StringVar(&c.Key, "key", "", "API key (writer) of a server in hosted mode")
			fs.Float64Var(&c.Rate, "rate", 0, "appends per second over all connections in the append phase (0: as fast as they go), e.g. half the maximum, for the analytics lag")
			return func(ctx context.Context, inv *cli.Invocation) error {
				c.Addr, c.HTTPAddr, c.DataDir = inv.Config.BinaryAddr, inv.Config.HTTPAddr, inv.Config.DataDir
				c.ServerDB = func(ctx context.Context) (*database.DB, func(), error) { return serverDB(ctx, inv.Config) }
				return bench.Run(ctx, c, inv.Stdout, inv.Stderr)
			}
		},
	}
}

// serverDB opens the database of the server the bench drives: the one at
// --database-url, or the embedded cluster of the server running on the
// data directory (a bench does not start one of its own).
func serverDB(ctx context.Context, cfg *config.Config) (*database.DB, func(), error) {
	if cfg.DatabaseURL == "" && !serverRuns(cfg.DataDir) {
		return nil, nil, fmt.Errorf("no server runs on %s (and no --database-url)", cfg.DataDir)
	}
	return openAdminDB(ctx, cfg, "cardbox bench")
}

// benchHTTPCommand is `cardbox bench-http` (package bench, RunHTTP).
func benchHTTPCommand() *cli.Command {
	return &cli.Command{
		Name: "bench-http", Settings: []string{"binary-addr", "http-addr"},
		Purpose: "Benchmark a running cardboxd's CXDB HTTP API: typed turn pages per second, and /v1/events latency while connections append; progress on a terminal.",
		Rules: map[string]config.Rule{
			"readers": config.Positive, "contexts": config.Positive, "limit": config.Positive, "size": config.Positive,
			"appenders": config.Positive, "duration": config.Positive, "events-duration": config.NonNegative,
		},
		Setup: func(fs *flag.FlagSet) cli.Action {
			var c bench.HTTPConfig
			fs.IntVar(&c.Readers, "readers", 8, "HTTP clients reading typed turn pages in parallel")
			fs.IntVar(&c.Contexts, "contexts", 16, "contexts the readers spread over")
			fs.IntVar(&c.PageTurns, "limit", 64, "turns per context and per page (?limit=)")
			fs.IntVar(&c.Size, "size", 1024, "payload size of each turn in bytes")
			fs.DurationVar(&c.Duration, "duration", 10*time.Second, "length of the typed-page phase")
			fs.IntVar(&c.Appenders, "appenders", 32, "binary connections appending during the events phase")
			fs.DurationVar(&c.EventsDuration, "events-duration", 10*time.Second, "length of the events phase (0 skips it)")
			fs.BoolVar(&c.JSON, "json", false, "print the results as JSON")
			return func(ctx context.Context, inv *cli.Invocation) error {
				c.Addr, c.HTTPAddr = inv.Config.BinaryAddr, inv.Config.HTTPAddr
				return bench.RunHTTP(ctx, c, inv.Stdout, inv.Stderr)
			}
		},
	}
}

// benchTenantsCommand is `cardbox bench-tenants` (package bench,
// RunTenants).
func benchTenantsCommand() *cli.Command {
	return &cli.Command{
		Name: "bench-tenants", Settings: []string{"binary-addr"},
		Purpose: "A/B rounds against a hosted server: one tenant's appends alone, and beside another tenant hammering past its rate limit.",
		Rules: map[string]config.Rule{
			"conns": config.Positive, "noisy-conns": config.Positive, "size": config.Positive, "rounds": config.Positive, "duration": config.Positive,
		},
		Setup: func(fs *flag.FlagSet) cli.Action {
			var c bench.TenantsConfig
			fs.StringVar(&c.VictimKey, "victim-key", "", "writer key of the tenant whose appends are measured (required)")
			fs.StringVar(&c.NoisyKey, "noisy-key", "", "writer key of the tenant that hammers the server, another tenant (required)")
			fs.IntVar(&c.Conns, "conns", 16, "victim connections appending in parallel")
			fs.IntVar(&c.NoisyConns, "noisy-conns", 16, "noisy connections appending in parallel, not waiting after a 429")
			fs.IntVar(&c.Size, "size", 1024, "payload size in bytes")
			fs.IntVar(&c.Rounds, "rounds", 5, "A/B rounds (each: the victim alone and beside the noisy tenant, in alternating order)")
			fs.DurationVar(&c.Duration, "duration", 10*time.Second, "length of each measurement")
			fs.BoolVar(&c.JSON, "json", false, "print the results as JSON")
			return func(ctx context.Context, inv *cli.Invocation) error {
				if c.VictimKey == "" || c.NoisyKey == "" {
					return inv.Usagef("missing --victim-key or --noisy-key (keys of two tenants of a hosted server)")
				}
				c.Addr = inv.Config.BinaryAddr
				return bench.RunTenants(ctx, c, inv.Stdout, inv.Stderr)
			}
		},
	}
}

// benchRetentionCommand is `cardbox bench-retention` (package bench,
// RunRetention).
func benchRetentionCommand() *cli.Command {
	return &cli.Command{
		Name: "bench-retention", Settings: benchSettings,
		Purpose: "A/B rounds against a running cardboxd (started with --sweep-interval 1s): appends on N connections with the retention sweeper idle, and while it deletes seeded expired contexts; the sweeper's contexts and turns per second.",
		Env:     map[string]string{"key": "CARDBOX_KEY"},
		Rules: map[string]config.Rule{
			"conns": config.Positive, "contexts": config.Positive, "size": config.Positive, "seed-contexts": config.Positive,
			"seed-turns": config.Positive, "seed-conns": config.Positive, "rounds": config.Positive, "duration": config.Positive,
			"idle": config.Positive, "wait": config.Positive,
		},
		Setup: func(fs *flag.FlagSet) cli.Action {
			var c bench.RetentionConfig
			fs.IntVar(&c.Conns, "conns", 64, "connections appending in parallel during each window")
			fs.IntVar(&c.Contexts, "contexts", 64, "contexts the appends spread over (never expired)")
			fs.IntVar(&c.Size, "size", 1024, "payload size in bytes, of the appends and of the seeded turns")
			fs.IntVar(&c.SeedContexts, "seed-contexts", 100000, "labelled contexts the sweeper deletes, seeded again before every sweeping window")
			fs.IntVar(&c.SeedTurns, "seed-turns", 10, "turns of each seeded context")
			fs.IntVar(&c.SeedConns, "seed-conns", 64, "connections seeding in parallel")
			fs.IntVar(&c.Rounds, "rounds", 5, "rounds, each an idle and a sweeping window in alternating order")
			fs.DurationVar(&c.Duration, "duration", 30*time.Second, "length of each window")
			fs.StringVar(&c.Tenant, "tenant", ident.DefaultTenantID, "tenant of the contexts (a hosted server's: the one of --key)")
			fs.StringVar(&c.Label, "label", "bench-retention", "label of the seeded contexts, which the benchmark's retention policy names")
			fs.DurationVar(&c.Idle, "idle", time.Second, "idle time of the policy a sweeping window sets on the label")
			fs.DurationVar(&c.Wait, "wait", 10*time.Minute, "longest wait for the server: the seeded contexts' metadata, the sweeper's start, the sweeper and the reaper finishing")
			fs.StringVar(&c.Key, "key", "", "API key (writer) of a server in hosted mode")
			fs.BoolVar(&c.JSON, "json", false, "print the results as JSON")
			return func(ctx context.Context, inv *cli.Invocation) error {
				c.Addr, c.HTTPAddr = inv.Config.BinaryAddr, inv.Config.HTTPAddr
				c.Admin = func(ctx context.Context) (*tenancy.Admin, func(), error) {
					db, release, err := serverDB(ctx, inv.Config)
					if err != nil {
						return nil, nil, err
					}
					return tenancy.New(db.Pool, nil), release, nil
				}
				return bench.RunRetention(ctx, c, inv.Stdout, inv.Stderr)
			}
		},
	}
}
