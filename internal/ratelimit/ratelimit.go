// Package ratelimit keeps each tenant to its request rate in hosted mode,
// so that no tenant can take the server from the others: a token bucket
// per tenant (golang.org/x/time/rate), whose rate and burst come from the
// tenant's own setting or the server's default.
package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rate is requests per second and the burst allowed above it; zero
// PerSec means no limit.
type Rate struct {
	PerSec float64
	Burst  int
}

// RefreshEvery is how often a tenant's setting is read again, so that a
// change made with the CLI applies without a restart.
const RefreshEvery = 5 * time.Second

// Limiter is the per-tenant buckets. Safe for concurrent use.
type Limiter struct {
	def    Rate
	lookup func(ctx context.Context, tenant string) (Rate, error)
	now    func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	lim     *rate.Limiter
	rate    Rate
	checked time.Time
}

// New returns a limiter giving every tenant def unless lookup (nil: none)
// returns a non-zero Rate of its own.
func New(def Rate, lookup func(ctx context.Context, tenant string) (Rate, error)) *Limiter {
	return &Limiter{def: def, lookup: lookup, now: time.Now, buckets: map[string]*bucket{}}
}

// Allow takes one request of tenant from its bucket. When the bucket is
// empty it returns false and how long until a request would be allowed
// (for Retry-After). A failed lookup keeps the last known rate: a limit
// is no reason to refuse service.
func (l *Limiter) Allow(ctx context.Context, tenant string) (bool, time.Duration) {
	now := l.now()
	lim := l.bucket(ctx, tenant, now)
	if lim == nil {
		return true, 0
	}
	if lim.AllowN(now, 1) {
		return true, 0
	}
	r := lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	return false, wait
}

// Forget drops a deleted tenant's bucket.
func (l *Limiter) Forget(tenant string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.buckets, tenant)
}

// bucket returns tenant's token bucket, nil when it is not limited. A
// bucket's rate and check time are read and written under l.mu only; its
// limiter is safe for concurrent use.
func (l *Limiter) bucket(ctx context.Context, tenant string, now time.Time) *rate.Limiter {
	l.mu.Lock()
	b := l.buckets[tenant]
	stale := b == nil || now.Sub(b.checked) >= RefreshEvery
	var known Rate
	if b != nil {
		known = b.rate
		if stale {
			b.checked = now // one caller refreshes; the others use the old rate meanwhile
		}
	}
	l.mu.Unlock()
	if stale {
		b, known = l.refresh(ctx, tenant, now, b != nil, known)
	}
	if known.PerSec <= 0 {
		return nil
	}
	return b.lim
}

// refresh reads tenant's rate and applies it to its bucket (a new one
// when it has none or the rate changed); known is the rate last read,
// when had says there was one. It returns the bucket and its rate.
func (l *Limiter) refresh(ctx context.Context, tenant string, now time.Time, had bool, known Rate) (*bucket, Rate) {
	r := l.def
	if l.lookup != nil {
		own, err := l.lookup(ctx, tenant)
		switch {
		case err != nil && had:
			r = known
		case err == nil && own.PerSec > 0:
			r = own
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[tenant]
	if b == nil || b.rate != r {
		// A new rate starts a full bucket.
		b = &bucket{lim: rate.NewLimiter(limit(r), r.Burst)}
		l.buckets[tenant] = b
	}
	b.rate, b.checked = r, now
	return b, r
}

func limit(r Rate) rate.Limit {
	if r.PerSec <= 0 {
		return rate.Inf
	}
	return rate.Limit(r.PerSec)
}

// RetryAfterSeconds is a wait as the whole seconds Retry-After takes (at
// least 1).
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
