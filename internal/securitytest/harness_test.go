package securitytest_test

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cxdbcompat/live"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/logtest"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/quota"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// ioTimeout bounds every wait on the network or on the server's
// background work.
const ioTimeout = 10 * time.Second

// cred is who a request claims to be.
type cred string

// The credentials every surface is tried with. Only acme has data; globex
// is the other tenant, whose keys must get nothing of acme's.
const (
	noKey        cred = "no key"
	malformedKey cred = "malformed key"
	forgedKey    cred = "forged key" // acme writer's key id with another secret
	revokedKey   cred = "revoked key"
	expiredKey   cred = "expired key"
	acmeAnalyst  cred = "acme analyst"
	acmeReader   cred = "acme reader"
	acmeWriter   cred = "acme writer"
	acmeAdmin    cred = "acme admin"
	globexWriter cred = "globex writer"
	globexAdmin  cred = "globex admin"
	operator     cred = "operator" // of no tenant: administers the service
)

// refused are the credentials no surface accepts, with the HTTP status
// they get on every route but the public ones.
var refused = []struct {
	cred   cred
	status int
}{
	{noKey, http.StatusUnauthorized},
	{malformedKey, http.StatusUnauthorized},
	{forgedKey, http.StatusUnauthorized},
	{revokedKey, http.StatusUnauthorized},
	{expiredKey, http.StatusUnauthorized},
	{acmeAnalyst, http.StatusForbidden},
}

// hosted is cardboxd in hosted mode: the daemon cardboxd runs, on a
// fresh Postgres database and data directory, with its defaults (no
// default quota, cardboxd's rates and connection limits), but that a
// tenant's own quota is read for every write, not every 5 s, so that a
// test sees a change at once, and event streams beat every 50 ms, so
// that streams of revoked keys end quickly. Pprof is on so that its
// admin-only route is tried too.
type hosted struct {
	pool    *pgxpool.Pool
	dataDir string
	engine  *store.Engine
	svc     *service.Service
	keys    *tenancy.Admin
	quota   *quota.Checker
	handler *api.Handler
	binAddr string
	url     string
	logs    *logtest.Errors
	all     *logtest.All // every record at every level: no secret may be in one
	secrets map[cred]string
	// tables are the tenant-owned tables (those with a tenant_id column).
	tables []string
}

func newHosted(t *testing.T) *hosted {
	t.Helper()
	h := &hosted{pool: pgtest.NewPool(t), logs: &logtest.Errors{}, all: &logtest.All{}, secrets: map[cred]string{}}
	cfg := daemontest.Config(t)
	cfg.Mode, cfg.Pprof, cfg.Pool = daemon.ModeHosted, true, h.pool
	cfg.Logger = slog.New(logtest.Tee{h.logs, h.all})
	cfg.Test.QuotaRefresh, cfg.Test.Heartbeat = -1, 50*time.Millisecond
	// Runs once the daemon has shut down (cleanups run last first).
	t.Cleanup(func() {
		if err := h.engine.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
		// No request of the suite may reach a 500 or an internal error.
		for _, r := range h.logs.Records() {
			t.Errorf("server logged an error: %s", r)
		}
		h.requireNoSecretLogged(t)
	})
	d := daemontest.Start(t, cfg)
	h.dataDir, h.engine, h.svc, h.keys, h.quota, h.handler = cfg.DataDir, d.Store(), d.CXDB(), d.Tenancy(), d.Quota(), d.Handler()
	h.binAddr, h.url = d.BinaryAddr(), "http://"+d.HTTPAddr()
	h.makeKeys(t)
	h.tables = tenantTables(t, h.pool)
	return h
}

// requireNoSecretLogged fails when any record the server logged, at any
// level, holds a key's secret (the part after its public id) that the
// suite sent.
func (h *hosted) requireNoSecretLogged(t *testing.T) {
	t.Helper()
	recs := h.all.Records()
	if len(recs) == 0 {
		t.Error("the server logged nothing at all: the check below proves nothing")
	}
	for c, secret := range h.secrets {
		if c == malformedKey || len(secret) < 43 {
			continue
		}
		tail := secret[len(secret)-43:]
		for _, r := range recs {
			if strings.Contains(r, tail) {
				t.Errorf("the server logged %s's secret: %s", c, r)
			}
		}
	}
}

// usage is what a tenant stores and its quota, as the daemon reports
// them for GET /admin/tenants.
func (h *hosted) usage(ctx context.Context, tenant string) (used, limit int64) {
	var stored int64
	if t, err := h.engine.Tenant(ctx, tenant); err == nil {
		stored = h.engine.Usage(t)
	}
	return h.quota.Usage(ctx, tenant, stored)
}

// makeKeys creates tenants acme and globex and the keys of every
// credential, through auth.Keys as `cardbox tenant create` and `cardbox key
// create` do.
func (h *hosted) makeKeys(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	seed.Tenants(t, h.keys, "acme", "globex")
	key := func(c cred, tenant string, role auth.Role, expires *time.Time) tenancy.Key {
		k, secret := seed.ExpiringKey(t, h.keys, tenant, role, expires)
		h.secrets[c] = secret
		return k
	}
	key(acmeAdmin, "acme", auth.RoleAdmin, nil)
	key(acmeWriter, "acme", auth.RoleWriter, nil)
	key(acmeReader, "acme", auth.RoleReader, nil)
	key(acmeAnalyst, "acme", auth.RoleAnalyst, nil)
	key(globexWriter, "globex", auth.RoleWriter, nil)
	key(globexAdmin, "globex", auth.RoleAdmin, nil)
	_, h.secrets[operator] = seed.OperatorKey(t, h.keys)
	// CreateKey refuses an expiry in the past: the key is made valid for
	// an hour, then expires as if the hour had passed.
	soon := time.Now().Add(time.Hour)
	expired := key(expiredKey, "acme", auth.RoleWriter, &soon)
	if _, err := h.pool.Exec(ctx, `UPDATE api_keys SET expires_at = now() - interval '1 hour' WHERE key_id = $1`, expired.ID); err != nil {
		t.Fatal(err)
	}
	gone := key(revokedKey, "acme", auth.RoleWriter, nil)
	if _, err := h.keys.RevokeKey(ctx, "securitytest", gone.ID); err != nil {
		t.Fatal(err)
	}
	w := h.secrets[acmeWriter]
	h.secrets[forgedKey] = w[:len(w)-8] + "AAAAAAAA"
	h.secrets[malformedKey] = "not-a-key"
}

// tenantTables lists the tables with a tenant_id column: every table a
// tenant owns rows of, but the two that count its card and box bytes,
// whose rows the sweeper moves from one to the other at any time (the
// snapshot compares their total instead), and SQL analytics' tables,
// which its projector derives from committed turns off the request path
// (a turn a refused request committed shows in turns).
func tenantTables(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.table_name FROM information_schema.columns c
		JOIN information_schema.tables USING (table_schema, table_name)
		WHERE c.column_name = 'tenant_id' AND c.table_schema = current_schema() AND table_type = 'BASE TABLE'
		  AND c.table_name NOT IN ('tenant_usage', 'cardbox_usage_log')
		  AND c.table_name <> 'turn_data' AND c.table_name NOT LIKE 'analytics\_%'
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 5 {
		t.Fatalf("tenant-owned tables: %v %v", tables, err)
	}
	return tables
}

// snapshot is what a refused request must leave as it was: each
// tenant-owned table's rows per tenant (their count and a digest of their
// content, so that an update such as a soft delete shows too), the bytes
// of each tenant's cards and boxes as Postgres counts them, the sizes of
// the data files, and the store's counts in memory.
type snapshot struct {
	rows  map[string]string // "table tenant" -> "count digest"
	files map[string]int64  // path in the data directory -> size
	stats store.Stats
}

func (h *hosted) snapshot(t testing.TB) snapshot {
	t.Helper()
	parts := make([]string, len(h.tables))
	for i, table := range h.tables {
		id := pgx.Identifier{table}.Sanitize()
		parts[i] = fmt.Sprintf(`SELECT %s, coalesce(tenant_id, ''), count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM %s x GROUP BY tenant_id`,
			pgQuote(table), id)
	}
	parts = append(parts, `SELECT 'cardbox bytes', t.tenant_id, coalesce(u.cardbox_bytes, 0)
		+ coalesce((SELECT sum(l.bytes) FROM cardbox_usage_log l WHERE l.tenant_id = t.tenant_id), 0)::bigint, ''
		FROM tenants t LEFT JOIN tenant_usage u USING (tenant_id)`)
	rows, err := h.pool.Query(context.Background(), strings.Join(parts, " UNION ALL "))
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	s := snapshot{rows: map[string]string{}, files: map[string]int64{}}
	var table, tenant, digest string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&table, &tenant, &n, &digest}, func() error {
		s.rows[table+" "+tenant] = fmt.Sprintf("%d rows %s", n, digest)
		return nil
	}); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	err = filepath.WalkDir(h.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(h.dataDir, path)
		s.files[rel] = info.Size()
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot of the data directory: %v", err)
	}
	s.stats = h.engine.Stats()
	s.stats.Groups = 0 // a work counter: a group of rejected appends counts
	return s
}

func pgQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// changes lists what differs between two snapshots; with tenant set, only
// that tenant's rows count (another tenant may rightly write its own).
func (s snapshot) changes(after snapshot, tenant string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(mergeKeys(s.rows, after.rows))) {
		if tenant != "" && !strings.HasSuffix(k, " "+tenant) {
			continue
		}
		if s.rows[k] != after.rows[k] {
			out = append(out, fmt.Sprintf("table %s: %q -> %q", k, s.rows[k], after.rows[k]))
		}
	}
	if tenant != "" {
		return out
	}
	for _, k := range slices.Sorted(maps.Keys(mergeKeys(s.files, after.files))) {
		if s.files[k] != after.files[k] {
			out = append(out, fmt.Sprintf("file %s: %d -> %d bytes", k, s.files[k], after.files[k]))
		}
	}
	if !reflect.DeepEqual(s.stats, after.stats) {
		out = append(out, fmt.Sprintf("store counts: %+v -> %+v", s.stats, after.stats))
	}
	return out
}

func mergeKeys[V any](a, b map[string]V) map[string]V {
	out := maps.Clone(a)
	for k, v := range b {
		out[k] = v
	}
	return out
}

// unchanged runs do and fails t if it changed anything (of tenant's, or
// anything at all when tenant is "").
func (h *hosted) unchanged(t *testing.T, tenant string, do func()) {
	t.Helper()
	h.metadataSettled(t)
	before := h.snapshot(t)
	do()
	if diff := before.changes(h.snapshot(t), tenant); len(diff) > 0 {
		t.Errorf("changed what it must not:\n%s", strings.Join(diff, "\n"))
	}
}

// metadataSettled waits until the service has extracted the metadata of
// every context that has a turn: it does so off the append path and
// writes the contexts row when done, which a snapshot taken earlier would
// count as a change made by whatever ran between the two.
func (h *hosted) metadataSettled(t *testing.T) {
	t.Helper()
	waitfor.Soon(t, "context metadata extracted", func() bool {
		var pending int
		err := h.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM contexts WHERE head_turn_id <> 0 AND NOT metadata_done`).Scan(&pending)
		return err == nil && pending == 0
	})
}

// waitEvent waits for the tenant's event name about context id on sub:
// the service's metadata extraction runs off the request path, and its
// event says it is done.
func waitEvent(t *testing.T, sub *live.Subscription, name string, contextID uint64) {
	t.Helper()
	deadline := time.After(ioTimeout)
	for {
		select {
		case <-sub.Wake():
			evs, _ := sub.Next(1024)
			for _, ev := range evs {
				if data, ok := ev.Data.(map[string]any); ok && ev.Name == name && data["context_id"] == fmt.Sprint(contextID) {
					return
				}
			}
		case <-deadline:
			t.Fatalf("no %s event for context %d within %v", name, contextID, ioTimeout)
		}
	}
}
