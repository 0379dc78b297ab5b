package cardbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/cardbox/sweep"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit"
)

// A write that changes existing cards or boxes (a soft delete, a box
// append, the sweeper's purges) racing its project's deletion queues behind
// it and finds its rows gone. The deletion locks the tenant's row, then
// deletes the cards and boxes (internal/tenancy's DeleteTenant); a write that
// locked a card or box first and its tenant's row second (the card change
// counter's update, the usage log's foreign key) deadlocked with it, and
// Postgres failed one of the two.
func TestWritesQueueBehindProjectDeletion(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		write func(*cardbox.Service, *testkit.Clock) (func() error, error)
	}{
		{"soft delete", func(s *cardbox.Service, _ *testkit.Clock) (func() error, error) {
			return func() error {
				if err := s.DeleteCard(ctx, "p1", "a"); !errors.Is(err, rules.ErrNotFound) {
					return fmt.Errorf("soft delete: %v, want not found", err)
				}
				return nil
			}, nil
		}},
		{"sweeper's purge", func(s *cardbox.Service, clk *testkit.Clock) (func() error, error) {
			if err := s.DeleteCard(ctx, "p1", "a"); err != nil {
				return nil, err
			}
			return sweepsNothing(s, clk), nil
		}},
		{"box append", func(s *cardbox.Service, _ *testkit.Clock) (func() error, error) {
			if _, err := s.SaveBox(ctx, "p1", "x", cardbox.BoxInput{CardIDs: []string{"a"}}); err != nil {
				return nil, err
			}
			return func() error {
				if _, err := s.AppendToBox(ctx, "p1", "x", []string{"b"}); !errors.Is(err, rules.ErrNotFound) {
					return fmt.Errorf("append: %v, want not found", err)
				}
				return nil
			}, nil
		}},
		{"box replace", func(s *cardbox.Service, _ *testkit.Clock) (func() error, error) {
			if _, err := s.SaveBox(ctx, "p1", "x", cardbox.BoxInput{CardIDs: []string{"a"}}); err != nil {
				return nil, err
			}
			// Admitted before the deletion, it is a write in flight: it
			// commits after it, and its row is one the purge of late rows
			// removes (internal/tenancy's PurgeDeleted).
			return func() error {
				if _, err := s.SaveBox(ctx, "p1", "x", cardbox.BoxInput{CardIDs: []string{"b"}}); err != nil {
					return fmt.Errorf("replace: %w", err)
				}
				return nil
			}, nil
		}},
		{"boxes' purge", func(s *cardbox.Service, clk *testkit.Clock) (func() error, error) {
			if _, err := s.SaveBox(ctx, "p1", "x", cardbox.BoxInput{CardIDs: []string{"a"}}); err != nil {
				return nil, err
			}
			if err := s.DeleteBox(ctx, "p1", "x"); err != nil {
				return nil, err
			}
			return sweepsNothing(s, clk), nil
		}},
		{"usage compaction", func(s *cardbox.Service, clk *testkit.Clock) (func() error, error) {
			return sweepsNothing(s, clk), nil // folds the cards' bytes into the project's total
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, pool, clk := newPoolService(t)
			if _, err := s.AddCards(ctx, "p1", []cardbox.NewCard{note("a", "doomed"), note("b", "doomed too")}); err != nil {
				t.Fatal(err)
			}
			write, err := tc.write(s, clk)
			if err != nil {
				t.Fatal(err)
			}
			deletion := pgtest.BeginDeletion(t, pool, "p1")
			written := make(chan error, 1)
			go func() { written <- write() }()
			if err, done := pgtest.UntilDoneOrWaiting(t, pool, written); done {
				t.Fatalf("the write ended (%v) before the deletion it should queue behind", err)
			}
			if err := deletion.Finish(); err != nil {
				t.Fatalf("the deletion: %v", err)
			}
			if err := <-written; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// sweepsNothing returns a sweep, due for what was deleted before clk's
// time, that must purge nothing: the project's deletion took it all.
func sweepsNothing(s *cardbox.Service, clk *testkit.Clock) func() error {
	clk.Add(2 * time.Hour)
	sw := s.NewSweeper(sweep.Config{DeletedRetention: time.Hour, BatchSize: 10})
	return func() error {
		if st, err := sw.Sweep(context.Background()); err != nil || st != (sweep.Stats{}) {
			return fmt.Errorf("sweep: %+v, %v, want nothing purged (the deletion took it)", st, err)
		}
		return nil
	}
}
