// Package sweep purges CardBox rows no read can return any more: cards
// expired long enough, and cards and boxes deleted longer ago than their
// retention; and it folds the log of the projects' card and box bytes
// into their totals. It runs in Postgres as the sweeper role, across
// projects.
package sweep

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cardboxhq/cardbox/cardbox/internal/cardboxdb"
	"github.com/cardboxhq/cardbox/internal/pgrole"
)

// Defaults.
const (
	DefaultSweepInterval    = time.Minute
	DefaultDeletedRetention = 7 * 24 * time.Hour
	DefaultSweepBatchSize   = 1000
)

// Config configures a Sweeper. Zero fields take the defaults.
type Config struct {
	// Interval is the time between passes.
	Interval time.Duration
	// DeletedRetention is how long soft-deleted cards and boxes are kept
	// before they are purged.
	DeletedRetention time.Duration
	// ExpiredRetention is how long expired cards are kept past their
	// expiry (0: purged at the first pass after they expire).
	ExpiredRetention time.Duration
	// BatchSize caps the rows one delete statement removes, to keep locks
	// short.
	BatchSize int
	Logger    *slog.Logger
}

// Stats counts the rows one pass purged.
type Stats struct {
	Cards int64
	Boxes int64
}

// Sweeper purges expired cards and long-deleted cards and boxes.
type Sweeper struct {
	q   *cardboxdb.Queries
	now func() time.Time
	cfg Config
}

// New returns a Sweeper over d with the clock now.
func New(d pgrole.Batcher, now func() time.Time, cfg Config) *Sweeper {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultSweepInterval
	}
	if cfg.DeletedRetention <= 0 {
		cfg.DeletedRetention = DefaultDeletedRetention
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultSweepBatchSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sweeper{q: cardboxdb.New(pgrole.As(d, pgrole.Sweeper, "")), now: now, cfg: cfg}
}

// Run sweeps at once and then every Interval until ctx is cancelled; it
// returns nil then. A failed pass is logged and retried at the next tick.
func (w *Sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		st, err := w.Sweep(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			w.cfg.Logger.Error("cardbox sweep failed", "err", err)
		case st.Cards+st.Boxes > 0:
			w.cfg.Logger.Info("cardbox sweep", "cards", st.Cards, "boxes", st.Boxes)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep runs one pass: it deletes, in batches, cards expired more than
// ExpiredRetention ago and cards and boxes deleted more than
// DeletedRetention ago, then folds the log of the projects' card and box
// bytes into their totals (migration 00013), so that the log holds about
// one interval of writes.
func (w *Sweeper) Sweep(ctx context.Context) (Stats, error) {
	st, err := w.purge(ctx)
	if err != nil {
		return st, err
	}
	if err := w.q.CompactCardBoxUsage(ctx); err != nil {
		return st, fmt.Errorf("compact card and box bytes: %w", err)
	}
	return st, nil
}

// purge deletes what Sweep deletes.
func (w *Sweeper) purge(ctx context.Context) (Stats, error) {
	now := w.now()
	var st Stats
	batch := int32(w.cfg.BatchSize)
	for {
		n, err := w.q.PurgeCards(ctx, cardboxdb.PurgeCardsParams{
			ExpiredBefore: now.Add(-w.cfg.ExpiredRetention),
			DeletedBefore: now.Add(-w.cfg.DeletedRetention),
			BatchSize:     batch,
		})
		st.Cards += n
		if err != nil {
			return st, fmt.Errorf("purge cards: %w", err)
		}
		if n < int64(batch) {
			break
		}
	}
	for {
		n, err := w.q.PurgeBoxes(ctx, cardboxdb.PurgeBoxesParams{
			DeletedBefore: now.Add(-w.cfg.DeletedRetention), BatchSize: batch,
		})
		st.Boxes += n
		if err != nil {
			return st, fmt.Errorf("purge boxes: %w", err)
		}
		if n < int64(batch) {
			return st, nil
		}
	}
}
