// Package membudget is a byte budget shared by everything that holds
// answers (or requests) in memory on a client's behalf, of which one
// tenant may hold at most a share, so that one tenant's large frames or
// answers cannot take all of it and stall every other tenant's.
//
// The binary port charges its large requests and answers to its budgets
// (cxdbcompat/server); the CXDB HTTP API charges its turn pages, blobs and
// files to the same answer budget, so both surfaces together stay within
// it.
package membudget

import (
	"context"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// Budget is a byte budget with per-tenant shares; safe for concurrent
// use.
type Budget struct {
	total int64
	all   *semaphore.Weighted
	share int64 // what one tenant may hold; 0: no shares
	held  atomic.Int64

	mu      sync.Mutex
	tenants map[string]*tenantShare
}

// tenantShare is one tenant's part of a budget; it exists while the tenant
// holds or waits for bytes.
type tenantShare struct {
	sem   *semaphore.Weighted
	users int // acquisitions holding or waiting
}

// New returns a budget of total bytes of which a tenant may hold fraction
// (at least minShare, the largest single charge); a fraction of 0 or 1
// gives no shares.
func New(total int64, fraction float64, minShare int64) *Budget {
	b := &Budget{total: total, all: semaphore.NewWeighted(total)}
	if share := max(int64(float64(total)*fraction), minShare); fraction > 0 && share < total {
		b.share, b.tenants = share, map[string]*tenantShare{}
	}
	return b
}

// Total is the budget's size in bytes.
func (b *Budget) Total() int64 { return b.total }

// Held is the bytes acquired and not yet released, across tenants.
func (b *Budget) Held() int64 { return b.held.Load() }

// Share is what one tenant may hold: the whole budget when there are no
// shares.
func (b *Budget) Share() int64 {
	if b.tenants == nil {
		return b.total
	}
	return b.share
}

// Acquire takes n bytes for tenant, waiting for room in its share and then
// in the whole budget, until ctx ends (then it returns ctx's error and
// holds nothing). n must not exceed Share, or it waits until ctx ends.
func (b *Budget) Acquire(ctx context.Context, tenant string, n int64) error {
	if b.tenants == nil {
		if err := b.all.Acquire(ctx, n); err != nil {
			return err
		}
		b.held.Add(n)
		return nil
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
	b.held.Add(n)
	return nil
}

// TryAcquire takes n bytes for tenant if its share and the budget have
// room now, without waiting; false (holding nothing) when not.
func (b *Budget) TryAcquire(tenant string, n int64) bool {
	if b.tenants == nil {
		if !b.all.TryAcquire(n) {
			return false
		}
		b.held.Add(n)
		return true
	}
	ts := b.join(tenant)
	if !ts.sem.TryAcquire(n) {
		b.leave(tenant)
		return false
	}
	if !b.all.TryAcquire(n) {
		ts.sem.Release(n)
		b.leave(tenant)
		return false
	}
	b.held.Add(n)
	return true
}

// Release gives back n bytes tenant acquired.
func (b *Budget) Release(tenant string, n int64) {
	b.held.Add(-n)
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

func (b *Budget) join(tenant string) *tenantShare {
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

func (b *Budget) leave(tenant string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ts := b.tenants[tenant]; ts != nil {
		if ts.users--; ts.users == 0 {
			delete(b.tenants, tenant)
		}
	}
}
