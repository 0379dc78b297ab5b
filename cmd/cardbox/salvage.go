package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/store/salvage"
)

// errDefects makes `cardbox verify` exit non-zero.
var errDefects = errors.New("the data directory has defects (see above); `cardbox recover` repairs what Postgres can rebuild")

// verify runs `cardbox verify`: offline, it re-reads every blob and turn
// record and cross-checks Postgres; it exits non-zero on any defect.
func verify(ctx context.Context, args []string) error {
	return offline(ctx, "cardbox verify", args, func(ctx context.Context, db *database.DB, cfg *config.Config) error {
		r, err := salvage.Verify(ctx, cfg.DataDir, db.Pool, os.Stderr)
		if err != nil {
			return err
		}
		r.Print(os.Stdout)
		if !r.OK() {
			return errDefects
		}
		fmt.Println("no defects")
		return nil
	})
}

// recoverStore runs `cardbox recover`: offline, it rebuilds the turn log
// and the pack's index from what Postgres and the pack hold, reports what
// it cannot rebuild, and checks that the store starts.
func recoverStore(ctx context.Context, args []string) error {
	return offline(ctx, "cardbox recover", args, func(ctx context.Context, db *database.DB, cfg *config.Config) error {
		r, err := salvage.Recover(ctx, cfg.DataDir, db.Pool, os.Stderr)
		if err != nil {
			return err
		}
		r.Print(os.Stdout)
		return r.StartErr
	})
}

// offline runs fn with the data directory's lock held (a running server
// makes it fail at once, naming the server) and its database open.
func offline(ctx context.Context, name string, args []string, fn func(context.Context, *database.DB, *config.Config) error) error {
	cfg, err := config.Parse(name, args, os.Stderr)
	if err != nil {
		return err
	}
	return offlineWith(ctx, name, cfg, fn)
}

// offlineWith is offline for a command that parsed its own flags.
func offlineWith(ctx context.Context, name string, cfg *config.Config, fn func(context.Context, *database.DB, *config.Config) error) error {
	// A mistyped path must not become a new, empty store.
	if _, err := os.Stat(cfg.DataDir); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	lock, err := datadir.Acquire(cfg.DataDir, name)
	if err != nil {
		return fmt.Errorf("%w (%s works on a stopped server)", err, name)
	}
	defer lock.Unlock()
	db, err := database.Open(ctx, cfg, database.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	return fn(ctx, db, cfg)
}
