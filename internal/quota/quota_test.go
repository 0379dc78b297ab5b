package quota_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/quota"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/internal/testkit"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// setup makes tenants acme and globex, and a checker reading their
// settings through auth.Keys as cardboxd's does, with default quota def.
func setup(t *testing.T, def int64) (*pgxpool.Pool, *tenancy.Admin, *quota.Checker, *testkit.Clock) {
	t.Helper()
	pool := pgtest.NewPool(t)
	keys := tenancy.New(pool, nil)
	seed.Tenants(t, keys, "acme", "globex")
	clk := testkit.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	c := quota.New(quota.Options{Default: def, Lookup: lookup(keys), Now: clk.Now})
	return pool, keys, c, clk
}

// lookup is cardboxd's quota.Lookup.
func lookup(keys *tenancy.Admin) quota.Lookup {
	return func(ctx context.Context, tenant string) (quota.Setting, error) {
		q, err := keys.TenantQuota(ctx, tenant)
		return quota.Setting{Quota: q.Bytes, CardBoxBytes: q.CardBoxBytes}, err
	}
}

func refused(err error) bool { return fault.KindOf(err) == fault.QuotaExceeded }

// The limit is the tenant's own quota, else the default (0: none); a write
// is refused when it would go over, and one that adds nothing only when
// the tenant is over already.
func TestStoreChecks(t *testing.T) {
	ctx := context.Background()
	_, keys, c, _ := setup(t, 1000)
	if err := keys.SetQuota(ctx, "test", "globex", 5000); err != nil {
		t.Fatal(err)
	}
	_, _, unlimited, _ := setup(t, 0)
	acme, globex := ident.Tenant{ID: "acme", No: 2}, ident.Tenant{ID: "globex", No: 3}
	for _, tt := range []struct {
		name           string
		c              *quota.Checker
		t              ident.Tenant
		stored, adding int64
		refused        bool
	}{
		{"under the default", c, acme, 500, 500, false},
		{"over the default", c, acme, 500, 501, true},
		{"nothing added at the quota", c, acme, 1000, 0, false},
		{"nothing added over the quota", c, acme, 1001, 0, true},
		{"under its own quota", c, globex, 4000, 1000, false},
		{"over its own quota", c, globex, 4000, 1001, true},
		{"no default", unlimited, acme, 1 << 40, 1 << 40, false},
	} {
		err := tt.c.CheckTurnStore(ctx, tt.t, tt.stored, tt.adding)
		if refused(err) != tt.refused || (err != nil && !tt.refused) {
			t.Errorf("%s: %v, refused want %v", tt.name, err, tt.refused)
		}
	}
	err := c.CheckTurnStore(ctx, acme, 900, 200)
	var se *fault.Error
	if !errors.As(err, &se) || se.Details["used_bytes"] != int64(900) || se.Details["quota_bytes"] != int64(1000) ||
		se.Details["adding_bytes"] != int64(200) {
		t.Errorf("refusal: %#v", err)
	}
}

// A tenant's cards and boxes count with its turn store bytes: Postgres's
// count, and what the checker admitted since it last read it.
func TestCardBoxBytesCount(t *testing.T) {
	ctx := context.Background()
	pool, _, c, clk := setup(t, 1000)
	acme := ident.Tenant{ID: "acme", No: 2}
	if err := c.CheckCardBox(ctx, "acme", 0, 600); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckTurnStore(ctx, acme, 400, 1); !refused(err) {
		t.Errorf("600 bytes admitted for cards, 400 stored, 1 more: %v, want refused", err)
	}
	if err := c.CheckCardBox(ctx, "acme", 400, 1); !refused(err) {
		t.Errorf("a card over the quota: %v, want refused", err)
	}
	if used, limit := c.Usage(ctx, "acme", 400); used != 1000 || limit != 1000 {
		t.Errorf("usage %d of %d, want 1000 of 1000", used, limit)
	}
	// The cards were never written: the next read of Postgres forgets them.
	clk.Add(quota.RefreshEvery)
	if err := c.CheckTurnStore(ctx, acme, 400, 600); err != nil {
		t.Errorf("after a refresh: %v", err)
	}
	// Cards Postgres holds count.
	if _, err := pool.Exec(ctx, `INSERT INTO cards (tenant_id, card_id, content) VALUES ('acme', 'c', to_jsonb(repeat('x', 498)))`); err != nil {
		t.Fatal(err)
	}
	clk.Add(quota.RefreshEvery)
	if used, _ := c.Usage(ctx, "acme", 0); used != 1+500+2 {
		t.Errorf("usage with a card of 503 bytes: %d", used)
	}
}

// A quota set with the CLI's function applies once the setting is read
// again (every RefreshEvery), not before; a failed read keeps the last one.
func TestQuotaChangesApplyAfterRefresh(t *testing.T) {
	ctx := context.Background()
	pool, keys, c, clk := setup(t, 1000)
	acme := ident.Tenant{ID: "acme", No: 2}
	if err := c.CheckTurnStore(ctx, acme, 1000, 1); !refused(err) {
		t.Fatalf("over the default: %v", err)
	}
	if err := keys.SetQuota(ctx, "test", "acme", 2000); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckTurnStore(ctx, acme, 1000, 1); !refused(err) {
		t.Errorf("before the refresh: %v, want the old quota", err)
	}
	clk.Add(quota.RefreshEvery)
	if err := c.CheckTurnStore(ctx, acme, 1000, 1); err != nil {
		t.Errorf("after the refresh: %v", err)
	}
	pool.Close() // every read fails from now on
	clk.Add(quota.RefreshEvery)
	if err := c.CheckTurnStore(ctx, acme, 1999, 2); !refused(err) {
		t.Errorf("with Postgres gone: %v, want the last quota known", err)
	}
}
