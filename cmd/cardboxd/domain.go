package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/cxdbcompat/analytics"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/pgbound"
)

// domainRoutes builds the CardBox routes and starts the background work of
// the domains: the sweeper that purges expired and long-deleted cards and
// boxes, the CXDB service's metadata extraction and, when not nil, the
// analytics projector. It returns the CardBox service too, and a func
// that stops the work and waits. admit is the storage quota check of card
// and box writes (nil: none).
func domainRoutes(ctx context.Context, cfg *config.Config, db *database.DB, cxdb *service.Service, proj *analytics.Projector,
	admit func(ctx context.Context, project string, adding int64) error, log *slog.Logger) ([]api.Routes, *cardbox.Service, func()) {
	// Every statement of the CardBox routes ends within --pg-timeout; the
	// sweeper is background work, which may take longer, on a service of
	// its own without the bound (and without a card cache).
	svc := cardbox.New(pgbound.DB{Pool: db.Pool, Timeout: cfg.PGTimeout}, cardbox.Options{CardCacheBytes: cfg.CardCacheBytes, Admit: admit})
	sweeper := cardbox.New(db.Pool, cardbox.Options{CardCacheBytes: -1}).NewSweeper(cardbox.SweeperConfig{
		Interval: cfg.SweepInterval, DeletedRetention: cfg.DeletedRetention, Logger: log,
	})
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := sweeper.Run(ctx); err != nil {
			log.Error("cardbox sweeper stopped", "err", err)
		}
	})
	wg.Go(func() {
		if err := cxdb.Run(ctx); err != nil {
			log.Error("cxdb metadata extraction stopped", "err", err)
		}
	})
	if proj != nil {
		wg.Go(func() {
			if err := proj.Run(ctx); err != nil {
				log.Error("analytics projector stopped", "err", err)
			}
		})
	}
	stop := func() {
		cancel()
		wg.Wait()
	}
	return []api.Routes{api.CardBox(svc)}, svc, stop
}
