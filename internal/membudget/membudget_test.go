package membudget_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cardboxhq/cardbox/internal/membudget"
)

func take(t *testing.T, b *membudget.Budget, tenant string, n int64) {
	t.Helper()
	if err := b.Acquire(context.Background(), tenant, n); err != nil {
		t.Fatal(err)
	}
}

func TestShareBoundsOneTenant(t *testing.T) {
	b := membudget.New(100, 0.25, 10)
	if b.Total() != 100 || b.Share() != 25 {
		t.Fatalf("total %d share %d, want 100 and 25", b.Total(), b.Share())
	}
	take(t, b, "a", 25)
	if b.TryAcquire("a", 1) {
		t.Fatal("a took more than its share")
	}
	// A wait for more than the share ends with its context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Acquire(ctx, "a", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("a over its share: %v, want the context's error", err)
	}
	// Another tenant is not held back by a's share.
	if !b.TryAcquire("b", 25) {
		t.Fatal("b refused while a holds its share")
	}
	b.Release("a", 25)
	if !b.TryAcquire("a", 25) {
		t.Fatal("a refused after releasing")
	}
	b.Release("a", 25)
	b.Release("b", 25)
}

func TestWholeBudgetBoundsAllTenants(t *testing.T) {
	b := membudget.New(100, 0.5, 0)
	take(t, b, "a", 50)
	take(t, b, "b", 50)
	if b.TryAcquire("c", 1) {
		t.Fatal("c took bytes of a spent budget")
	}
	if b.Held() != 100 {
		t.Fatalf("held %d, want 100", b.Held())
	}
	b.Release("a", 50)
	if !b.TryAcquire("c", 50) {
		t.Fatal("c refused after a released")
	}
	b.Release("b", 50)
	if b.Held() != 50 {
		t.Fatalf("held %d after releases, want 50", b.Held())
	}
}

func TestNoShares(t *testing.T) {
	b := membudget.New(100, 0, 0)
	if b.Share() != 100 {
		t.Fatalf("share %d, want the whole budget", b.Share())
	}
	take(t, b, "a", 100)
	if b.TryAcquire("b", 1) {
		t.Fatal("took bytes of a spent budget")
	}
	if b.Held() != 100 {
		t.Fatalf("held %d, want 100", b.Held())
	}
	b.Release("a", 100)
	if b.Held() != 0 {
		t.Fatalf("held %d after release, want 0", b.Held())
	}
}
