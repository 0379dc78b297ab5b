package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/cxdbcompat/analytics"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	sqlcdb "github.com/cardboxhq/cardbox/sqlc/db"
	"github.com/cardboxhq/cardbox/store"
)

// analyticsCommand runs `cardbox analytics <subcommand>`.
func analyticsCommand(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "backfill" {
		return fmt.Errorf("usage: cardbox analytics backfill [--tenant NAME] [server flags]")
	}
	return analyticsBackfill(ctx, args[1:])
}

// analyticsBackfill runs `cardbox analytics backfill`: offline (the server
// does the same by itself after each publish and at start), it projects
// every turn without a turn_data row, then re-projects each tenant's rows
// its registry now projects differently. Progress goes to stderr; a run a
// crash or Ctrl-C stopped resumes from its stored cursor. Beside a running
// server it follows the server's backfills instead.
func analyticsBackfill(ctx context.Context, args []string) error {
	const name = "cardbox analytics backfill"
	var only string
	cfg, rest, err := config.ParseCommand(name, args, os.Stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&only, "tenant", "", "only this tenant's rows (default: every tenant)")
	})
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments: %v", rest)
	}
	err = offlineWith(ctx, name, cfg, func(ctx context.Context, db *database.DB, cfg *config.Config) error {
		engine, err := store.Open(ctx, store.Options{Dir: cfg.DataDir, Pool: db.Pool, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		defer engine.Close()
		svc := service.New(engine, service.Options{})
		proj := analytics.New(analytics.Options{Source: svc, Pool: db.Background, MaxPayload: cfg.AnalyticsMaxPayload})
		return runBackfill(ctx, proj, svc, only)
	})
	if errors.Is(err, datadir.ErrLocked) {
		// A server runs: it backfills by itself; show how far it is.
		return followServer(ctx, cfg)
	}
	return err
}

// followServer shows the progress of the backfills a running server is
// doing, until none is left unfinished.
func followServer(ctx context.Context, cfg *config.Config) error {
	db, err := database.Open(ctx, cfg, database.Options{Guest: cfg.DatabaseURL == "", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	fmt.Fprintln(os.Stderr, "a server owns the data directory and re-projects by itself after each publish; following it")
	return followBackfills(ctx, sqlcdb.New(pgrole.As(db.Pool, pgrole.Projector, "")), time.Second)
}

// followBackfills prints the unfinished backfills every interval until
// there are none.
func followBackfills(ctx context.Context, q *sqlcdb.Queries, interval time.Duration) error {
	for {
		running, err := q.RunningBackfills(ctx)
		if err != nil {
			return fmt.Errorf("read backfills: %w", err)
		}
		if len(running) == 0 {
			fmt.Fprintln(os.Stderr, "no backfill left to run")
			return nil
		}
		for _, b := range running {
			fmt.Fprintf(os.Stderr, "tenant %s, registry generation %d: at turn %d, %d re-projected (running)\n",
				b.TenantID, b.Generation, b.AfterTurnID, b.Reprojected)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// runBackfill catches up, then backfills each tenant (or only one).
func runBackfill(ctx context.Context, proj *analytics.Projector, svc *service.Service, only string) error {
	fmt.Fprintln(os.Stderr, "projecting turns without typed data...")
	if err := proj.CatchUp(ctx); err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	tenants := []string{only}
	if only == "" {
		var err error
		if tenants, err = proj.Tenants(ctx); err != nil {
			return err
		}
	}
	for _, id := range tenants {
		t, err := svc.Tenant(ctx, id)
		if err != nil {
			return fmt.Errorf("tenant %q: %w", id, err)
		}
		if err := proj.Backfill(ctx, t, printProgress()); err != nil {
			return err
		}
	}
	return nil
}

// printProgress returns a progress callback that writes a line to stderr
// at most every second, and the last one.
func printProgress() func(analytics.Progress) {
	var last time.Time
	return func(p analytics.Progress) {
		if !p.Done && time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		state := "running"
		if p.Done {
			state = "done"
		}
		fmt.Fprintf(os.Stderr, "tenant %s, registry generation %d: %d of %d rows looked at, %d re-projected (%s)\n",
			p.Tenant, p.Generation, p.Scanned, p.Total, p.Reprojected, state)
	}
}
