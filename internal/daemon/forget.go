package daemon

import (
	"context"
	"log/slog"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/cxdbcompat/turnpage"
	"github.com/cardboxhq/cardbox/internal/ratelimit"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/store"
)

// forgetter makes this server forget every tenant deleted by `cardbox
// tenant delete` or DELETE /admin/tenants, from any process, within
// moments: the deletion's transaction notifies, and the forgetter stops
// the tenant's writes (waiting for those in flight), drops what memory
// holds of it (store, caches, events, rate bucket), closes its binary
// sessions, and then purges the rows the writes in flight added after the
// deletion committed. In both modes: a dev mode project is a tenant too.
type forgetter struct {
	admin   *tenancy.Admin
	engine  *store.Engine
	cxdb    *service.Service
	pages   *turnpage.Pages
	cards   *cardbox.Service
	bin     *server.Server
	limiter *ratelimit.Limiter // nil in dev mode
	log     *slog.Logger
}

// watch forgets deleted tenants until ctx ends.
func (f *forgetter) watch(ctx context.Context) {
	_ = f.admin.WatchTenants(ctx, func(id string) { f.deleted(ctx, id) }) // ctx's error, when the daemon stops
}

// deleted forgets tenant id, or, for "" (a notification may have been
// missed), every deleted tenant the store has not forgotten, then purges
// what writes in flight left of them.
func (f *forgetter) deleted(ctx context.Context, id string) {
	if id != "" {
		f.forget(ctx, id)
	} else if err := f.forgetMissed(ctx); err != nil {
		f.log.Warn("look for deleted tenants", "err", err)
	}
	tables, err := f.admin.PurgeDeleted(ctx, id)
	if err != nil {
		f.log.Warn("purge the rows of deleted tenants; the next notification or restart retries", "tenant", id, "err", err)
		return
	}
	if d := (tenancy.Deletion{TenantID: id, Tables: tables}); d.Total() > 0 {
		f.log.Info("purged rows that writes in flight added after a tenant's deletion", "tenant", id, "rows", d.Total())
	}
}

// forgetMissed forgets the deleted tenants the store still knows.
func (f *forgetter) forgetMissed(ctx context.Context) error {
	tenants, err := f.admin.DeletedTenants(ctx)
	if err != nil {
		return err
	}
	for _, t := range tenants {
		if !f.engine.Forgotten(t) {
			f.forget(ctx, t.ID)
		}
	}
	return nil
}

// forget drops tenant id from this server.
func (f *forgetter) forget(ctx context.Context, id string) {
	t, err := f.engine.ForgetTenant(ctx, id)
	if err != nil {
		f.log.Warn("forget a deleted tenant", "tenant", id, "err", err)
		return
	}
	closed := f.bin.CloseSessions(func(s server.Identity) bool { return s.Tenant.No == t.No })
	f.cards.ForgetProject(id)
	f.cxdb.ForgetTenant(t)
	f.pages.ForgetTenant(t)
	if f.limiter != nil {
		f.limiter.Forget(id)
	}
	f.log.Info("forgot a deleted tenant", "tenant", id, "sessions_closed", closed)
}
