// Package tenantgate keeps a deleted tenant's writes out of a running
// server. A tenant's deletion commits in Postgres while the server may be
// in the middle of the tenant's writes; once the server hears of it, it
// closes the tenant's gate: Close waits for the writes admitted before,
// and every write after is refused. What those last writes added is then
// purged, and nothing of the tenant can be written again.
//
// Reads ask Gone, which takes no lock.
package tenantgate

import (
	"sync"
	"sync/atomic"
)

// Gate admits writes per tenant until the tenant's gate is closed. The
// zero Gate admits everyone. Safe for concurrent use.
type Gate[K comparable] struct {
	// mu is held shared by every admitted write, exclusively by Close.
	mu sync.RWMutex
	// gone is the set of closed tenants, replaced whole on every Close so
	// that Gone reads it without a lock; nil while it is empty.
	gone atomic.Pointer[map[K]struct{}]
}

// Gone reports whether tenant's gate is closed.
func (g *Gate[K]) Gone(tenant K) bool {
	m := g.gone.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[tenant]
	return ok
}

// Enter admits a write of tenant and reports true, or reports false when
// the tenant is gone. An admitted write must call Leave when done, and
// must not Enter again before (a waiting Close would deadlock it).
func (g *Gate[K]) Enter(tenant K) bool {
	g.mu.RLock()
	if g.Gone(tenant) {
		g.mu.RUnlock()
		return false
	}
	return true
}

// Leave ends a write Enter admitted.
func (g *Gate[K]) Leave() { g.mu.RUnlock() }

// Close refuses tenant's writes from now on, once the writes admitted
// before (every tenant's) have left. It reports false when the tenant's
// gate was closed already.
func (g *Gate[K]) Close(tenant K) bool {
	if g.Gone(tenant) {
		return false
	}
	return g.CloseAll([]K{tenant}) == 1
}

// CloseAll closes the gates of tenants at once, as Close does each, and
// returns how many were open.
func (g *Gate[K]) CloseAll(tenants []K) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	next := map[K]struct{}{}
	if old := g.gone.Load(); old != nil {
		for k := range *old {
			next[k] = struct{}{}
		}
	}
	n := len(next)
	for _, k := range tenants {
		next[k] = struct{}{}
	}
	g.gone.Store(&next)
	return len(next) - n
}
