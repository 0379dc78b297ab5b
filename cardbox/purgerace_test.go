package cardbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/sweep"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit"
)

// hookedDB is a database whose transactions call hook with the name of
// each sqlc query before they send it: a test runs the sweeper between a
// write's statements.
type hookedDB struct {
	*pgxpool.Pool
	hook func(query string)
}

func (d hookedDB) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return hookedTx{Tx: tx, hook: d.hook}, nil
}

type hookedTx struct {
	pgx.Tx
	hook func(query string)
}

func (tx hookedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	for _, q := range b.QueuedQueries {
		if name, ok := strings.CutPrefix(q.SQL, "-- name: "); ok {
			name, _, _ = strings.Cut(name, " ")
			tx.hook(name)
		}
	}
	return tx.Tx.SendBatch(ctx, b)
}

// A write of an id whose expired or long-deleted row the sweeper purges
// between the write's insert (which finds the id taken) and its check of
// the taken ids succeeds: the id is free again, and the write inserts it.
// If ids keep vanishing, the write is refused as unavailable (503 with
// Retry-After), never as a fault of the server.
func TestAddCardsRacingThePurge(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// races is how many of the write's passes find "short" taken
		// and then purged.
		races       int
		unavailable bool
	}{
		{"one purge", 1, false},
		{"a purge in every pass", 1 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := pgtest.NewPool(t)
			clk := testkit.NewClock(testStart)
			plain := cardbox.New(pool, cardbox.Options{Now: clk.Now, CardCacheBytes: -1})
			sw := plain.NewSweeper(sweep.Config{DeletedRetention: time.Hour})
			var inserts, purged int
			hooked := cardbox.New(hookedDB{Pool: pool, hook: func(query string) {
				switch {
				case query == "InsertCards" && inserts > 0 && inserts < tc.races:
					// Another writer takes the id again, and it expires.
					if err := addExpired(ctx, plain, clk); err != nil {
						t.Errorf("write short again: %v", err)
					}
				case query == "CompareCards" && purged < tc.races:
					st, err := sw.Sweep(ctx)
					if err != nil || st.Cards != 1 {
						t.Errorf("Sweep = %+v, %v; want 1 card purged", st, err)
					}
					purged++
				}
				if query == "InsertCards" {
					inserts++
				}
			}}, cardbox.Options{Now: clk.Now, CardCacheBytes: -1})
			if err := addExpired(ctx, plain, clk); err != nil {
				t.Fatal(err)
			}
			got, err := hooked.AddCards(ctx, "p1", []cardbox.NewCard{note("other", "1"), note("short", "new content")})
			switch {
			case purged == 0:
				t.Fatal("the sweeper purged nothing between the insert and the check: the race was not run")
			case tc.unavailable:
				if fault.KindOf(err) != fault.Unavailable {
					t.Fatalf("AddCards = %v (kind %v), want UNAVAILABLE", err, fault.KindOf(err))
				}
				return
			case err != nil:
				t.Fatalf("AddCards = %v after %d purges, want success", err, purged)
			case len(got) != 2 || string(got[1].Content) != `"new content"` || got[1].ExpiresAt != nil:
				t.Fatalf("AddCards = %+v", got)
			}
			// The write committed: the new card is the stored one.
			card, err := plain.GetCardJSONWithin(ctx, "p1", "short", unlimited)
			if err != nil || !strings.Contains(string(card), "new content") {
				t.Fatalf("short = %s, %v", card, err)
			}
		})
	}
}

// addExpired writes the card "short" with a ttl of a second and moves the
// clock past its expiry.
func addExpired(ctx context.Context, s *cardbox.Service, clk *testkit.Clock) error {
	short := note("short", "x")
	short.TTLSeconds = 1
	if _, err := s.AddCards(ctx, "p1", []cardbox.NewCard{short}); err != nil {
		return err
	}
	clk.Add(2 * time.Second)
	return nil
}
