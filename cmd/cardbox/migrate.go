package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/migrations"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name: "migrate", Settings: dbSettings,
		Purpose: "Apply pending SQL migrations to a stopped server's database (embedded or --database-url) and print their status.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			return func(ctx context.Context, inv *cli.Invocation) error { return migrate(ctx, inv) }
		},
	}
}

// migrate applies the migrations to the configured database offline: it
// takes the data directory's lock (a running server applied them when it
// started), starts the embedded Postgres if no URL is set, and stops it
// again.
func migrate(ctx context.Context, inv *cli.Invocation) error {
	cfg := inv.Config
	lock, err := datadir.Acquire(cfg.DataDir, "cardbox migrate")
	if errors.Is(err, datadir.ErrLocked) {
		return fmt.Errorf("%w (a running cardboxd applies the migrations when it starts; `cardbox migrate` is for a stopped one)", err)
	}
	if err != nil {
		return err
	}
	defer lock.Unlock()
	db, err := database.Open(ctx, cfg, database.Options{Owner: true})
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	status, err := migrations.Status(ctx, db.Pool)
	if err != nil {
		return err
	}
	for _, s := range status {
		fmt.Fprintf(inv.Stdout, "%-8s %05d %s\n", s.State, s.Source.Version, s.Source.Path)
	}
	return nil
}

func configCommand() *cli.Command {
	return &cli.Command{
		Name:    "config",
		Purpose: "Print the configuration table (every setting's flag, environment variable, default and meaning) in markdown, as the README shows it.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			return func(_ context.Context, inv *cli.Invocation) error {
				_, err := fmt.Fprint(inv.Stdout, config.Markdown())
				return err
			}
		},
	}
}
