package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeRates is a lookup whose answers a test changes.
type fakeRates struct {
	mu    sync.Mutex
	rates map[string]Rate
	err   error
}

func (f *fakeRates) lookup(_ context.Context, tenant string) (Rate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rates[tenant], f.err
}

func newTestLimiter(def Rate, f *fakeRates) (*Limiter, *time.Time) {
	now := time.Unix(1_700_000_000, 0)
	l := New(def, f.lookup)
	l.now = func() time.Time { return now }
	return l, &now
}

// allowed counts how many of n requests at one instant are allowed.
func allowed(l *Limiter, tenant string, n int) (ok int, wait time.Duration) {
	for range n {
		if a, w := l.Allow(context.Background(), tenant); a {
			ok++
		} else {
			wait = w
		}
	}
	return ok, wait
}

func TestBurstThenRefusalWithRetryAfter(t *testing.T) {
	l, now := newTestLimiter(Rate{PerSec: 10, Burst: 5}, &fakeRates{})
	ok, wait := allowed(l, "acme", 8)
	if ok != 5 || wait <= 0 || wait > 100*time.Millisecond {
		t.Fatalf("allowed %d of 8, wait %v; want 5 and about 100 ms", ok, wait)
	}
	*now = now.Add(100 * time.Millisecond)
	if ok, _ := allowed(l, "acme", 2); ok != 1 {
		t.Errorf("after 100 ms at 10/s: %d allowed, want 1", ok)
	}
	if RetryAfterSeconds(wait) != 1 || RetryAfterSeconds(1500*time.Millisecond) != 2 {
		t.Error("Retry-After rounds up to whole seconds")
	}
}

func TestTenantsHaveTheirOwnBuckets(t *testing.T) {
	f := &fakeRates{rates: map[string]Rate{"big": {PerSec: 100, Burst: 50}}}
	l, _ := newTestLimiter(Rate{PerSec: 1, Burst: 2}, f)
	tests := []struct {
		tenant string
		want   int
	}{{"acme", 2}, {"globex", 2}, {"big", 50}}
	for _, tt := range tests {
		if ok, _ := allowed(l, tt.tenant, 60); ok != tt.want {
			t.Errorf("%s: %d allowed, want %d", tt.tenant, ok, tt.want)
		}
	}
}

func TestSettingsAreReadAgain(t *testing.T) {
	f := &fakeRates{rates: map[string]Rate{}}
	l, now := newTestLimiter(Rate{}, f) // no default limit
	if ok, _ := allowed(l, "acme", 100); ok != 100 {
		t.Fatalf("unlimited tenant: %d of 100", ok)
	}
	f.mu.Lock()
	f.rates["acme"] = Rate{PerSec: 1, Burst: 3}
	f.mu.Unlock()
	if ok, _ := allowed(l, "acme", 10); ok != 10 {
		t.Fatalf("before the refresh: %d of 10", ok)
	}
	*now = now.Add(RefreshEvery)
	if ok, _ := allowed(l, "acme", 10); ok != 3 {
		t.Fatalf("after the refresh: %d of 10, want the burst of 3", ok)
	}
	// A lookup that fails keeps the rate known last.
	f.mu.Lock()
	f.err = errors.New("database down")
	f.mu.Unlock()
	*now = now.Add(RefreshEvery)
	if ok, _ := allowed(l, "acme", 10); ok != 3 {
		t.Errorf("with the lookup failing: %d of 10, want 3", ok)
	}
}

// Concurrent callers share each tenant's bucket exactly: at one instant,
// of 4,000 requests per tenant from four goroutines each, the burst and
// no more are allowed (run with -race, it also checks the locking).
func TestConcurrentUse(t *testing.T) {
	l, _ := newTestLimiter(Rate{PerSec: 1, Burst: 1000}, &fakeRates{})
	var (
		wg      sync.WaitGroup
		granted [8]int
	)
	for i := range 8 {
		wg.Go(func() { granted[i], _ = allowed(l, []string{"a", "b"}[i%2], 1000) })
	}
	wg.Wait()
	perTenant := map[string]int{}
	for i, n := range granted {
		perTenant[[]string{"a", "b"}[i%2]] += n
	}
	if perTenant["a"] != 1000 || perTenant["b"] != 1000 {
		t.Errorf("allowed %v at one instant, want the burst (1000) for each tenant", perTenant)
	}
}

// Forget drops a deleted tenant's bucket; another tenant's stays spent.
func TestForget(t *testing.T) {
	l, _ := newTestLimiter(Rate{PerSec: 1, Burst: 2}, &fakeRates{})
	allowed(l, "acme", 2)
	allowed(l, "bravo", 2)
	l.Forget("acme")
	l.mu.Lock()
	_, acme := l.buckets["acme"]
	_, bravo := l.buckets["bravo"]
	l.mu.Unlock()
	if acme || !bravo {
		t.Fatalf("buckets after Forget: acme %v, bravo %v; want bravo's only", acme, bravo)
	}
}
