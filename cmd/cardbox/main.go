// Command cardbox is the cardbox CLI: administration (tenants, keys,
// analysts' SQL roles), offline maintenance (migrate, verify, recover,
// analytics backfill), and clients of a running server (bench, sample,
// sql, health, attack). `cardbox --help` lists the commands, and
// `cardbox COMMAND --help` says how to call one.
package main

import (
	"context"
	"flag"
	"os/signal"
	"syscall"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cli.Main(ctx, commands())
}

// commands is the dispatch table: every command of cardbox.
func commands() *cli.Command {
	return &cli.Command{
		Name:    "cardbox",
		Purpose: "Administer, check and measure a cardbox server.",
		Subs: []*cli.Command{
			migrateCommand(),
			benchCommand(),
			benchHTTPCommand(),
			benchTenantsCommand(),
			benchRetentionCommand(),
			tenantCommand(),
			keyCommand(),
			sqlRoleCommand(),
			sqlCommand(execPsql),
			configCommand(),
			healthCommand(),
			attackCommand(),
			verifyCommand(),
			recoverCommand(),
			backupCommand(),
			restoreCommand(),
			sampleCommand(),
			contextCommand(),
			compactCommand(),
			retentionCommand(),
			analyticsCommand(),
		},
	}
}

// healthCommand is `cardbox health` (health.go), which parses its own
// arguments: the flags here describe and check them, then health gets
// them as given.
func healthCommand() *cli.Command {
	return &cli.Command{
		Name: "health", Settings: []string{"http-addr", "tls-cert"},
		Purpose: "GET /healthz on the server's --http-addr; exit 0 when it answers 200, else 1 (the container's health check).",
		Rules:   map[string]config.Rule{"timeout": config.Positive, "wait": config.NonNegative},
		Setup: func(fs *flag.FlagSet) cli.Action {
			fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
			fs.Duration("wait", 0, healthWaitUsage)
			return func(ctx context.Context, inv *cli.Invocation) error {
				return runHealth(ctx, inv.Given, inv.Stdout, inv.Stderr)
			}
		},
	}
}
