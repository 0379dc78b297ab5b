package store

import (
	"context"
	"sync"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
)

// tenantCache resolves tenant ids; tenants are never renumbered, so an
// answer can be kept forever.
type tenantCache struct {
	q  *storedb.Queries
	mu sync.RWMutex
	m  map[string]ident.Tenant
	// ids maps tenant numbers back to ids for the batch statement.
	ids map[uint32]string
}

func newTenantCache(q *storedb.Queries) *tenantCache {
	return &tenantCache{q: q, m: map[string]ident.Tenant{}, ids: map[uint32]string{}}
}

func (c *tenantCache) get(ctx context.Context, id string) (ident.Tenant, error) {
	c.mu.RLock()
	t, ok := c.m[id]
	c.mu.RUnlock()
	if ok {
		return t, nil
	}
	row, err := c.q.GetTenant(ctx, id)
	if isNoRows(err) {
		return ident.Tenant{}, fault.New(fault.NotFound, "tenant %q not found", id)
	}
	if err != nil {
		return ident.Tenant{}, fault.Wrap(fault.Unavailable, err, "look up tenant %q", id)
	}
	t = ident.Tenant{ID: row.TenantID, No: uint32(row.TenantNo)}
	c.add(t)
	return t, nil
}

func (c *tenantCache) add(t ident.Tenant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[t.ID] = t
	c.ids[t.No] = t.ID
}

// learn records a tenant resolved elsewhere: hosted mode's API keys carry
// their tenant (id and number) from their own lookup, so a tenant created
// while the server runs reaches Append without passing through get. The
// committer names every tenant it writes by idOf.
func (c *tenantCache) learn(t ident.Tenant) {
	c.mu.RLock()
	_, known := c.ids[t.No]
	c.mu.RUnlock()
	if !known && t.ID != "" {
		c.add(t)
	}
}

// idOf returns the id of tenant number no; the committer only sees tenants
// that were resolved through get or learned from the job that wrote them.
func (c *tenantCache) idOf(no uint32) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.ids[no]
}
