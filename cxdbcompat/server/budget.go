package server

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"
)

// budget is a byte budget shared by all sessions, of which one tenant may
// hold at most a share, so that one tenant's large frames or answers
// cannot take all of it and stall every other tenant's.
type budget struct {
	all   *semaphore.Weighted
	share int64 // what one tenant may hold; >= the whole budget: no shares

	mu      sync.Mutex
	tenants map[string]*tenantShare
}

// tenantShare is one tenant's part of a budget; it exists while the tenant
// holds or waits for bytes.
type tenantShare struct {
	sem   *semaphore.Weighted
	users int // acquisitions holding or waiting
}

// newBudget returns a budget of total bytes of which a tenant may hold
// fraction (at least minShare, the largest single charge); a fraction of
// 0 or 1 gives no shares.
func newBudget(total int64, fraction float64, minShare int64) *budget {
	b := &budget{all: semaphore.NewWeighted(total)}
	if share := max(int64(float64(total)*fraction), minShare); fraction > 0 && share < total {
		b.share, b.tenants = share, map[string]*tenantShare{}
	}
	return b
}

// acquire takes n bytes for tenant, waiting for room in its share and then
// in the whole budget, until ctx ends.
func (b *budget) acquire(ctx context.Context, tenant string, n int64) error {
	if b.tenants == nil {
		return b.all.Acquire(ctx, n)
	}
	ts := b.join(tenant)
	if err := ts.sem.Acquire(ctx, n); err != nil {
		b.leave(tenant)
		return err
	}
	if err := b.all.Acquire(ctx, n); err != nil {
		ts.sem.Release(n)
		b.leave(tenant)
		return err
	}
	return nil
}

// release gives back n bytes tenant acquired.
func (b *budget) release(tenant string, n int64) {
	b.all.Release(n)
	if b.tenants == nil {
		return
	}
	b.mu.Lock()
	ts := b.tenants[tenant]
	b.mu.Unlock()
	ts.sem.Release(n)
	b.leave(tenant)
}

func (b *budget) join(tenant string) *tenantShare {
	b.mu.Lock()
	defer b.mu.Unlock()
	ts := b.tenants[tenant]
	if ts == nil {
		ts = &tenantShare{sem: semaphore.NewWeighted(b.share)}
		b.tenants[tenant] = ts
	}
	ts.users++
	return ts
}

func (b *budget) leave(tenant string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ts := b.tenants[tenant]; ts != nil {
		if ts.users--; ts.users == 0 {
			delete(b.tenants, tenant)
		}
	}
}
