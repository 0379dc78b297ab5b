package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/migrations"
)

// migrate applies the migrations to the configured database offline: it
// takes the data directory's lock (a running server applied them when it
// started), starts the embedded Postgres if no URL is set, and stops it
// again.
func migrate(ctx context.Context, args []string) error {
	cfg, err := config.Parse("cardbox migrate", args, os.Stderr)
	if err != nil {
		return err
	}
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
		fmt.Printf("%-8s %05d %s\n", s.State, s.Source.Version, s.Source.Path)
	}
	return nil
}

func printConfig() error {
	fmt.Print(config.Markdown())
	return nil
}
