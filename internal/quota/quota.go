// Package quota keeps each tenant within its storage quota in hosted mode
// (docs/security.md, "Storage quotas"): a write that would take a tenant
// over its quota is refused before anything of it is written, with a
// fault.QuotaExceeded error (binary ERROR 507 and HTTP 507
// QUOTA_EXCEEDED, distinct from a full disk's DISK_FULL).
//
// A tenant's usage has two parts. The turn store's (blobs charged as if
// the tenant were alone, turns, contexts, registry bundles) is exact and
// kept by the store (store.Engine.Usage); callers pass it in. Its cards'
// and boxes' bytes are counted by Postgres (tenant_usage.cardbox_bytes)
// and read with the tenant's quota. The quota is the tenant's own
// (tenants.quota_bytes, set with `cardbox tenant quota`) or the server's
// default (--tenant-quota-bytes); both are read again every RefreshEvery.
//
// Writes are checked against the usage known when they are admitted, so
// writes admitted at the same time may together overshoot the quota by
// what they add (at most the writes in flight; see docs/security.md).
package quota

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// RefreshEvery is how often a tenant's quota and CardBox bytes are read
// again, so that a change made with the CLI applies without a restart.
const RefreshEvery = 5 * time.Second

// Setting is what Postgres says of a tenant.
type Setting struct {
	// Quota is the tenant's own quota in bytes; 0 takes the default.
	Quota int64
	// CardBoxBytes is what its cards and boxes hold.
	CardBoxBytes int64
}

// Lookup reads a tenant's Setting (tenancy.Admin.TenantQuota).
type Lookup func(ctx context.Context, tenant string) (Setting, error)

// Options configure a Checker.
type Options struct {
	// Default is the quota of tenants without their own; 0: unlimited.
	Default int64
	// Lookup reads a tenant's setting; nil: every tenant has Default and
	// no CardBox bytes.
	Lookup Lookup
	// RefreshEvery is how long a setting is used before it is read again
	// (RefreshEvery when 0; negative: read for every write).
	RefreshEvery time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Checker decides whether tenants may write. Safe for concurrent use.
type Checker struct {
	opts Options

	mu    sync.Mutex
	known map[string]*entry
}

type entry struct {
	setting Setting
	checked time.Time
}

// New returns a Checker.
func New(opts Options) *Checker {
	if opts.RefreshEvery == 0 {
		opts.RefreshEvery = RefreshEvery
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Checker{opts: opts, known: map[string]*entry{}}
}

// CheckTurnStore checks a write to the turn store; it is the store's
// store.QuotaFunc. stored is what the turn store holds for the tenant.
func (c *Checker) CheckTurnStore(ctx context.Context, t ident.Tenant, stored, adding int64) error {
	s := c.setting(ctx, t.ID)
	return check(t.ID, c.limit(s), stored+s.CardBoxBytes, adding)
}

// CheckCardBox checks a write of cards or boxes that adds about adding bytes;
// stored is what the turn store holds for the tenant. An admitted write's
// bytes count at once, until the next read of Postgres's count replaces
// them, so that the writes after it see them.
func (c *Checker) CheckCardBox(ctx context.Context, tenant string, stored, adding int64) error {
	s := c.setting(ctx, tenant)
	if err := check(tenant, c.limit(s), stored+s.CardBoxBytes, adding); err != nil {
		return err
	}
	c.mu.Lock()
	if e := c.known[tenant]; e != nil {
		e.setting.CardBoxBytes += adding
	}
	c.mu.Unlock()
	return nil
}

// Usage returns what a tenant stores, given its turn store bytes, and its
// quota (0: unlimited), as the checker knows them.
func (c *Checker) Usage(ctx context.Context, tenant string, stored int64) (used, quota int64) {
	s := c.setting(ctx, tenant)
	return stored + s.CardBoxBytes, c.limit(s)
}

// Exceeded is the error of a write refused because it would take the
// tenant over its storage quota: used bytes stored of quota, adding more.
// It is distinct from a full disk (fault.DiskFull).
func Exceeded(tenant string, used, quota, adding int64) *fault.Error {
	return &fault.Error{
		Kind: fault.QuotaExceeded,
		Message: fmt.Sprintf("storage quota exceeded: tenant %q stores %d bytes of its %d-byte quota and this write would add %d; "+
			"nothing was written (this is the tenant's quota, not a full disk: the operator can raise it with `cardbox tenant quota`)",
			tenant, used, quota, adding),
		Details: map[string]any{"used_bytes": used, "quota_bytes": quota, "adding_bytes": adding},
	}
}

// check refuses adding bytes to used when that goes over limit (0: none).
// A write that adds nothing is refused only when the tenant is over
// already (its quota was lowered, or writes overshot it together).
func check(tenant string, limit, used, adding int64) error {
	if limit > 0 && used+adding > limit {
		return Exceeded(tenant, used, limit, adding)
	}
	return nil
}

func (c *Checker) limit(s Setting) int64 {
	if s.Quota > 0 {
		return s.Quota
	}
	return c.opts.Default
}

// setting returns tenant's setting, reading it again when it is stale.
// One caller reads; the others use the old setting meanwhile.
func (c *Checker) setting(ctx context.Context, tenant string) Setting {
	now := c.opts.Now()
	c.mu.Lock()
	e := c.known[tenant]
	stale := e == nil || now.Sub(e.checked) >= c.opts.RefreshEvery
	var s Setting
	if e != nil {
		s = e.setting
		if stale {
			e.checked = now
		}
	}
	c.mu.Unlock()
	if stale {
		s = c.refresh(ctx, tenant, now, s)
	}
	return s
}

// refresh reads tenant's setting and remembers it. When the read fails
// the last known setting stays (a quota is no reason to refuse service
// while Postgres is away; the write would fail on its own).
func (c *Checker) refresh(ctx context.Context, tenant string, now time.Time, last Setting) Setting {
	s := last
	if c.opts.Lookup != nil {
		if got, err := c.opts.Lookup(ctx, tenant); err == nil {
			s = got
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.known[tenant] = &entry{setting: s, checked: now}
	return s
}
