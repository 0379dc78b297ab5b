package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/sweep"
	"github.com/cardboxhq/cardbox/internal/pgbound"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// newCardBox makes the CardBox service of the routes and its sweeper,
// which purges expired and long-deleted cards and boxes. Every statement
// of the routes ends within --pg-timeout; the sweeper is background work,
// which may take longer, on a service of its own without the bound (and
// without a card cache). admit is the storage quota check of card and box
// writes (nil: none).
func newCardBox(cfg *Config, pool *pgxpool.Pool, admit func(ctx context.Context, project string, adding int64) error,
	log *slog.Logger) (*cardbox.Service, *sweep.Sweeper) {
	svc := cardbox.New(pgbound.DB{Pool: pool, Timeout: cfg.PGTimeout}, cardbox.Options{CardCacheBytes: cfg.CardCacheBytes, Admit: admit, Now: cfg.Test.Now})
	sweeper := cardbox.New(pool, cardbox.Options{CardCacheBytes: -1, Now: cfg.Test.Now}).NewSweeper(sweep.Config{
		Interval: cfg.SweepInterval, DeletedRetention: cfg.DeletedRetention, Logger: log,
	})
	return svc, sweeper
}

// startBackground starts the domains' background work: the sweeper, the
// retention sweeper (contexts the tenants' policies expire, every
// --sweep-interval), the compaction trigger, the CXDB service's metadata
// extraction and, with analytics on, the projector.
func (d *Daemon) startBackground() {
	d.goWork(func(ctx context.Context) {
		if err := d.sweeper.Run(ctx); err != nil {
			d.log.Error("cardbox sweeper stopped", "err", err)
		}
	})
	d.goWork(func(ctx context.Context) {
		if err := d.cxdb.RunRetention(ctx, d.cfg.SweepInterval); err != nil {
			d.log.Error("retention sweeper stopped", "err", err)
		}
	})
	d.goWork(func(ctx context.Context) {
		if err := d.cxdb.Run(ctx); err != nil {
			d.log.Error("cxdb metadata extraction stopped", "err", err)
		}
	})
	d.goWork(func(ctx context.Context) {
		tick := d.cfg.Test.CompactionTick
		if tick == nil {
			t := time.NewTicker(compactionCheckEvery(d.cfg.EraseWithin))
			defer t.Stop()
			d.compactions.watch(ctx, t.C)
			return
		}
		d.compactions.watch(ctx, tick)
	})
	if d.proj != nil {
		d.goWork(func(ctx context.Context) {
			if err := d.proj.Run(ctx); err != nil {
				d.log.Error("analytics projector stopped", "err", err)
			}
		})
	}
}

// startWatches starts the watches on other processes' administration:
// revoked and expired keys lose their binary sessions (hosted mode), and
// deleted tenants are forgotten (both modes).
func (d *Daemon) startWatches() {
	d.forget = &forgetter{
		admin: tenancy.New(d.db.Pool, d.log), engine: d.engine, cxdb: d.cxdb, pages: d.pages, cards: d.cards, bin: d.bin,
		limiter: d.access.limiter, log: d.log,
	}
	d.goWork(func(ctx context.Context) { d.access.watch(ctx, d.bin, d.log) })
	d.goWork(d.forget.watch)
}
