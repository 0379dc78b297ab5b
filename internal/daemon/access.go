package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/adminhttp"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/quota"
	"github.com/cardboxhq/cardbox/internal/ratelimit"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/store"
)

// access is how the surfaces check callers: nothing in dev mode, API keys
// in hosted mode.
type access struct {
	keys    *auth.Keys         // nil in dev mode
	tenants *tenancy.Admin     // nil in dev mode
	limiter *ratelimit.Limiter // nil in dev mode
	quota   *quota.Checker     // nil in dev mode
}

func newAccess(cfg *Config, pool *pgxpool.Pool, log *slog.Logger) access {
	if cfg.Mode != ModeHosted {
		return access{}
	}
	tenants := tenancy.New(pool, log).Bound(cfg.PGTimeout)
	own := func(ctx context.Context, tenant string) (ratelimit.Rate, error) {
		r, err := tenants.TenantRate(ctx, tenant)
		return ratelimit.Rate{PerSec: r.PerSec, Burst: r.Burst}, err
	}
	return access{
		keys:    auth.NewKeys(pool, log).Bound(cfg.PGTimeout),
		tenants: tenants,
		limiter: ratelimit.New(ratelimit.Rate{PerSec: cfg.TenantRate, Burst: cfg.TenantBurst}, own),
		quota:   newQuota(cfg, tenants),
	}
}

// newQuota is hosted mode's storage quota checker: --tenant-quota-bytes
// unless `cardbox tenant quota` set a tenant's own.
func newQuota(cfg *Config, tenants *tenancy.Admin) *quota.Checker {
	lookup := func(ctx context.Context, tenant string) (quota.Setting, error) {
		q, err := tenants.TenantQuota(ctx, tenant)
		return quota.Setting{Quota: q.Bytes, CardBoxBytes: q.CardBoxBytes}, err
	}
	return quota.New(quota.Options{Default: cfg.TenantQuotaBytes, Lookup: lookup, RefreshEvery: cfg.Test.QuotaRefresh})
}

// storeQuota is the turn store's quota check; nil in dev mode.
func (a access) storeQuota() store.QuotaFunc {
	if a.quota == nil {
		return nil
	}
	return a.quota.CheckTurnStore
}

// cardboxAdmit is the CardBox service's quota check; nil in dev mode. A
// tenant's turn store bytes count with its cards and boxes.
func (a access) cardboxAdmit(engine *store.Engine) func(ctx context.Context, project string, adding int64) error {
	if a.quota == nil {
		return nil
	}
	return func(ctx context.Context, project string, adding int64) error {
		t, err := engine.Tenant(ctx, project)
		if err != nil {
			return err
		}
		return a.quota.CheckCardBox(ctx, project, engine.Usage(t), adding)
	}
}

// usage reports a tenant's stored bytes and quota (0: none) for GET
// /admin/tenants; nil in dev mode.
func (a access) usage(engine *store.Engine) adminhttp.UsageFunc {
	if a.quota == nil {
		return nil
	}
	return func(ctx context.Context, tenant string) (used, limit int64) {
		var stored int64
		if t, err := engine.Tenant(ctx, tenant); err == nil {
			stored = engine.Usage(t)
		}
		return a.quota.Usage(ctx, tenant, stored)
	}
}

// limit is the surfaces' rate check; nil in dev mode.
func (a access) limit() func(ctx context.Context, tenant string) (bool, time.Duration) {
	if a.limiter == nil {
		return nil
	}
	return a.limiter.Allow
}

// memoryShare is the fraction of the binary port's memory budgets one
// tenant may hold; 0 (no shares) in dev mode, which has one tenant.
func (a access) memoryShare(cfg *Config) float64 {
	if a.keys == nil {
		return 0
	}
	return cfg.TenantMemoryShare
}

// binary is the binary server's authenticator; nil in dev mode.
func (a access) binary() server.Authenticator {
	if a.keys == nil {
		return nil
	}
	return server.KeyAuthenticator(a.keys)
}

// http is the HTTP API's authenticator; nil in dev mode.
func (a access) http() api.Authenticator {
	if a.keys == nil {
		return nil
	}
	return a.keys
}

// expirySweep is how often open sessions are checked for keys that
// expired (revocations are notified; expiry is not).
const expirySweep = 30 * time.Second

// watch closes the binary sessions of revoked keys, within moments of
// `cardbox key revoke` from any process, and of expired keys, until ctx
// ends. It returns at once in dev mode.
func (a access) watch(ctx context.Context, bin *server.Server, log *slog.Logger) {
	if a.keys == nil {
		return
	}
	closeInvalid := func(keyID string) {
		if n := closeInvalid(ctx, a.keys, bin, keyID); n > 0 {
			log.Info("closed binary sessions of a revoked or expired key", "key_id", keyID, "sessions", n)
		}
	}
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		tick := time.NewTicker(expirySweep)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				closeInvalid("")
			}
		}
	}()
	_ = a.keys.Watch(ctx, closeInvalid) // ctx's error, when the daemon stops
	<-swept
}

// closeInvalid closes the sessions of keyID ("" for every key) whose key is
// no longer valid. Keys are checked before any session is closed, outside
// the server's lock.
func closeInvalid(ctx context.Context, keys *auth.Keys, bin *server.Server, keyID string) int {
	invalid := map[string]bool{}
	for _, id := range bin.Identities() {
		if id.KeyID == "" || (keyID != "" && id.KeyID != keyID) {
			continue
		}
		if _, seen := invalid[id.KeyID]; !seen {
			ok, err := keys.ValidKey(ctx, id.KeyID)
			invalid[id.KeyID] = err == nil && !ok
		}
	}
	return bin.CloseSessions(func(id server.Identity) bool { return invalid[id.KeyID] })
}
