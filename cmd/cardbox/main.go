// Command cardbox is the cardbox CLI: administration (tenants, keys,
// analysts' SQL roles), offline maintenance (migrate, verify, recover,
// analytics backfill), and clients of a running server (bench, sample,
// sql, attack). `cardbox --help` lists the commands, and
// `cardbox COMMAND --help` says how to call one.
package main

import (
	"context"
	"os/signal"
	"syscall"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
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
			tenantCommand(),
			keyCommand(),
			sqlRoleCommand(),
			sqlCommand(execPsql),
			configCommand(),
			attackCommand(),
			verifyCommand(),
			recoverCommand(),
			sampleCommand(),
			analyticsCommand(),
		},
	}
}
