package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
)

// domainRoutes builds the CardBox routes and starts the sweeper that purges
// expired and long-deleted cards and boxes. The returned func stops the
// sweeper and waits for it.
func domainRoutes(ctx context.Context, cfg *config.Config, db *database.DB, log *slog.Logger) ([]api.Routes, func()) {
	svc := cardbox.New(db.Pool, cardbox.Options{CardCacheBytes: cfg.CardCacheBytes})
	sweeper := svc.NewSweeper(cardbox.SweeperConfig{
		Interval: cfg.SweepInterval, DeletedRetention: cfg.DeletedRetention, Logger: log,
	})
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := sweeper.Run(ctx); err != nil {
			log.Error("cardbox sweeper stopped", "err", err)
		}
	})
	stop := func() {
		cancel()
		wg.Wait()
	}
	return []api.Routes{api.CardBox(svc)}, stop
}
