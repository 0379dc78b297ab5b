package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/cxdbcompat/analytics"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	sqlcdb "github.com/cardboxhq/cardbox/sqlc/db"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/metastore"
)

// analyticsCommand is `cardbox analytics`.
func analyticsCommand() *cli.Command {
	return &cli.Command{
		Name:    "analytics",
		Purpose: "SQL analytics' maintenance (see docs/analytics.md).",
		Subs: []*cli.Command{{
			Name: "backfill", Settings: append(slices.Clone(dbSettings), "analytics-max-payload"),
			Purpose: "Offline: project turns without typed data (turn_data) and re-project what published bundles changed; resumable; beside a running server, follow its backfills.",
			Setup: func(fs *flag.FlagSet) cli.Action {
				only := fs.String("tenant", "", "only this tenant's rows (default: every tenant)")
				return func(ctx context.Context, inv *cli.Invocation) error { return analyticsBackfill(ctx, inv, *only) }
			},
		}},
	}
}

// analyticsBackfill runs `cardbox analytics backfill`: offline (the server
// does the same by itself after each publish and at start), it projects
// every turn without a turn_data row, then re-projects each tenant's rows
// its registry now projects differently. Progress shows on a terminal; a
// run a crash or Ctrl-C stopped resumes from its stored cursor. Beside a
// running server it follows the server's backfills instead.
func analyticsBackfill(ctx context.Context, inv *cli.Invocation, only string) error {
	progress := cli.NewProgress(inv.Stderr)
	err := offline(ctx, inv, func(ctx context.Context, db *database.DB, cfg *config.Config) error {
		engine, err := store.Open(ctx, store.Options{Dir: cfg.DataDir, Pool: db.Pool, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		defer engine.Close()
		svc := service.New(engine, metastore.New(db.Pool, 0, engine), service.Options{})
		proj := analytics.New(analytics.Options{Source: svc, Pool: db.Background, MaxPayload: cfg.AnalyticsMaxPayload})
		return runBackfill(ctx, proj, svc, only, progress)
	})
	if errors.Is(err, datadir.ErrLocked) {
		// A server runs: it backfills by itself; show how far it is.
		return followServer(ctx, inv.Config, progress)
	}
	return err
}

// followServer shows the progress of the backfills a running server is
// doing, until none is left unfinished.
func followServer(ctx context.Context, cfg *config.Config, progress *cli.Progress) error {
	db, err := database.Open(ctx, cfg, database.Options{Guest: cfg.DatabaseURL == "", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	progress.Done("a server owns the data directory and re-projects by itself after each publish; following it")
	return followBackfills(ctx, sqlcdb.New(pgrole.As(db.Pool, pgrole.Projector, "")), time.Second, progress)
}

// followBackfills shows the unfinished backfills every interval until
// there are none.
func followBackfills(ctx context.Context, q *sqlcdb.Queries, interval time.Duration, progress *cli.Progress) error {
	for {
		running, err := q.RunningBackfills(ctx)
		if err != nil {
			return fmt.Errorf("read backfills: %w", err)
		}
		if len(running) == 0 {
			progress.Done("no backfill left to run")
			return nil
		}
		b := running[0]
		progress.Show("%d backfills running; tenant %s, registry generation %d: at turn %d, %d re-projected",
			len(running), b.TenantID, b.Generation, b.AfterTurnID, b.Reprojected)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// runBackfill catches up, then backfills each tenant (or only one).
func runBackfill(ctx context.Context, proj *analytics.Projector, svc *service.Service, only string, progress *cli.Progress) error {
	progress.Show("projecting turns without typed data...")
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
		if err := proj.Backfill(ctx, t, showBackfill(progress)); err != nil {
			return err
		}
	}
	progress.Done("")
	return nil
}

// showBackfill returns a progress callback that shows how far a tenant's
// backfill is, leaving each tenant's last line on the screen.
func showBackfill(progress *cli.Progress) func(analytics.Progress) {
	return func(p analytics.Progress) {
		line := fmt.Sprintf("tenant %s, registry generation %d: %d of %d rows looked at, %d re-projected",
			p.Tenant, p.Generation, p.Scanned, p.Total, p.Reprojected)
		if p.Done {
			progress.Done(line + " (done)")
			return
		}
		progress.Show("%s", line)
	}
}
