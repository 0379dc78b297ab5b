package main

import (
	"context"
	"fmt"
	"os"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/migrations"
)

// migrate applies the migrations to the configured database (starting the
// data directory's embedded Postgres if no URL is set, and stopping it
// again unless a server was already using it).
func migrate(ctx context.Context, args []string) error {
	cfg, err := config.Parse("cardbox migrate", args, os.Stderr)
	if err != nil {
		return err
	}
	db, err := database.Open(ctx, cfg, database.Options{KeepEmbedded: true})
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
