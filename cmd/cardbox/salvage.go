package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/store/salvage"
)

// errDefects makes `cardbox verify` exit non-zero.
var errDefects = errors.New("the data directory has defects (see above); `cardbox recover` repairs what Postgres can rebuild")

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name: "verify", Settings: dbSettings,
		Purpose: "Offline: re-read every blob and turn record and cross-check Postgres; exit 1 on any defect.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			return func(ctx context.Context, inv *cli.Invocation) error { return verify(ctx, inv) }
		},
	}
}

// verify re-reads every blob and turn record and cross-checks Postgres,
// with progress on a terminal.
func verify(ctx context.Context, inv *cli.Invocation) error {
	return offline(ctx, inv, func(ctx context.Context, db *database.DB, cfg *config.Config) error {
		r, err := salvage.Verify(ctx, cfg.DataDir, db.Pool, cli.NewProgress(inv.Stderr).Writer())
		if err != nil {
			return err
		}
		r.Print(inv.Stdout)
		if !r.OK() {
			return errDefects
		}
		fmt.Fprintln(inv.Stdout, "no defects")
		return nil
	})
}

func recoverCommand() *cli.Command {
	return &cli.Command{
		Name: "recover", Settings: dbSettings,
		Purpose: "Offline: rebuild the turn log and the blob pack's index from Postgres and the pack; report what cannot be rebuilt.",
		Setup: func(fs *flag.FlagSet) cli.Action {
			return func(ctx context.Context, inv *cli.Invocation) error { return recoverStore(ctx, inv) }
		},
	}
}

// recoverStore rebuilds the turn log and the pack's index from what
// Postgres and the pack hold, reports what it cannot rebuild, and checks
// that the store starts.
func recoverStore(ctx context.Context, inv *cli.Invocation) error {
	return offline(ctx, inv, func(ctx context.Context, db *database.DB, cfg *config.Config) error {
		r, err := salvage.Recover(ctx, cfg.DataDir, db.Pool, cli.NewProgress(inv.Stderr).Writer())
		if err != nil {
			return err
		}
		r.Print(inv.Stdout)
		return r.StartErr
	})
}

// offline runs fn with the data directory's lock held (a running server
// makes it fail at once, naming the server) and its database open.
func offline(ctx context.Context, inv *cli.Invocation, fn func(context.Context, *database.DB, *config.Config) error) error {
	cfg := inv.Config
	// A mistyped path must not become a new, empty store.
	if _, err := os.Stat(cfg.DataDir); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	lock, err := datadir.Acquire(cfg.DataDir, inv.Path)
	if err != nil {
		return fmt.Errorf("%w (%s works on a stopped server)", err, inv.Path)
	}
	defer lock.Unlock()
	db, err := database.Open(ctx, cfg, database.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	return fn(ctx, db, cfg)
}
