package tenancy

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// seeds puts one row in every table a tenant owns rows of (the turn
// store's rows as the committer writes them, without files: this package
// checks the rows only).
var seeds = []string{
	`INSERT INTO contexts (tenant_id, context_id, head_turn_id, head_depth) VALUES ($1, nextval('context_id_seq'), 0, 0)`,
	`INSERT INTO turns (tenant_id, turn_id, context_id, parent_turn_id, depth, type_id, type_version, encoding,
	     compression, uncompressed_len, payload_hash, created_at)
	 SELECT $1, (SELECT coalesce(max(turn_id), 0) + 1 FROM turns), max(context_id), 0, 1, 't', 1, 1, 0, 1, '\x01', now()
	 FROM contexts WHERE tenant_id = $1`,
	`INSERT INTO turn_metadata (tenant_id, turn_id, title) SELECT $1, max(turn_id), 'title' FROM turns WHERE tenant_id = $1`,
	`INSERT INTO fs_attachments (tenant_id, turn_id, fs_root_hash) SELECT $1, max(turn_id), '\x02' FROM turns WHERE tenant_id = $1`,
	`INSERT INTO idempotency_keys (tenant_id, context_id, idempotency_key, turn_id, created_at)
	 SELECT $1, context_id, 'k', turn_id, now() FROM turns WHERE tenant_id = $1`,
	`INSERT INTO turn_types (tenant_id, type_ref, type_id) VALUES ($1, 1, 't')`,
	`INSERT INTO tenant_blobs (tenant_id, blob_hash) VALUES ($1, '\x03')`,
	`INSERT INTO registry_bundles (tenant_id, bundle_id, body) VALUES ($1, 'b', '{}')`,
	`INSERT INTO cards (tenant_id, card_id, content) VALUES ($1, 'c', '"hi"')`,
	`INSERT INTO boxes (tenant_id, box_id, card_ids) VALUES ($1, 'x', '{c}')`,
	`INSERT INTO box_snapshots (tenant_id, box_id, snapshot_id, entry_ids, card_ids, zones, positions, drafts, created_at)
	 VALUES ($1, 'x', 's', '{e1}', '{c}', '{2}', '{a0}', '{f}', now())`,
	`INSERT INTO sql_roles (role_name, tenant_id) VALUES ('cardbox_sql_seed_' || $1, $1)`,
	`INSERT INTO tenant_usage (tenant_id, cardbox_bytes) VALUES ($1, 1) ON CONFLICT (tenant_id) DO NOTHING`,
	`INSERT INTO turn_data (tenant_id, turn_id, type_id, type_version, data, registry_generation, parent_turn_id)
	 SELECT $1, max(turn_id), 't', 1, '{}', 1, 0 FROM turns WHERE tenant_id = $1`,
	`INSERT INTO analytics_tool_call_rows (tenant_id, turn_id, idx, source, failed)
	 SELECT $1, max(turn_id), 0, 'tool_call', false FROM turns WHERE tenant_id = $1`,
	`INSERT INTO analytics_daily (tenant_id, day, type_id, type_version, turns) VALUES ($1, '2026-11-25', 't', 1, 1)`,
	`INSERT INTO analytics_children (tenant_id, turn_id, children) VALUES ($1, 1, 2)`,
	`INSERT INTO analytics_usage (tenant_id, turns, payload_bytes, data_bytes) VALUES ($1, 1, 1, 1)`,
	`INSERT INTO analytics_context_turns (tenant_id, context_id, turns) VALUES ($1, 1, 1)`,
	`INSERT INTO analytics_keyed (tenant_id, context_id, day, keyed_appends) VALUES ($1, 1, '2026-11-25', 1)`,
	`INSERT INTO analytics_watermarks (tenant_id, turn_id) VALUES ($1, 1)`,
	`INSERT INTO analytics_backfills (tenant_id, generation) VALUES ($1, 1)`,
	`INSERT INTO dead_turns (tenant_id, turn_id) VALUES ($1, 1)`,
	`INSERT INTO retention_policies (tenant_id, idle_seconds) VALUES ($1, 3600)`,
	`INSERT INTO released_blob_claims (tenant_id, blob_hash) VALUES ($1, '\x03')`,
	`INSERT INTO blob_puts (tenant_id, blob_hash, put_at) VALUES ($1, '\x03', now())`,
	`INSERT INTO blob_claim_reviews (tenant_id, blob_hash, fs_root) VALUES ($1, '\x03', false)`,
}

// seedTenant creates tenant id with a key and a row in every table.
func seedTenant(t *testing.T, adm *Admin, pool *pgxpool.Pool, id string) string {
	t.Helper()
	mustTenant(t, adm, id)
	_, secret := mustKey(t, adm, id, auth.RoleWriter, nil)
	for _, q := range seeds {
		if _, err := pool.Exec(context.Background(), q, id); err != nil {
			t.Fatalf("seed %s: %v\n%s", id, err, q)
		}
	}
	return secret
}

// tenantTables lists every table with a tenant_id column but tenants
// and the audit log, which outlive a tenant.
func tenantTables(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.table_name::text FROM information_schema.columns c
		JOIN information_schema.tables USING (table_schema, table_name)
		WHERE c.table_schema = 'public' AND c.column_name = 'tenant_id' AND table_type = 'BASE TABLE'
		  AND c.table_name NOT IN ('tenants', 'audit_log')
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		out = append(out, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// rowsOf counts tenant id's rows in each table.
func rowsOf(t *testing.T, pool *pgxpool.Pool, tables []string, id string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range tables {
		var n int64
		if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE tenant_id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

func TestDeleteTenantRemovesItsRowsOnly(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	adm := New(pool, nil)
	acmeSecret := seedTenant(t, adm, pool, "acme")
	bravoSecret := seedTenant(t, adm, pool, "bravo")
	tables := tenantTables(t, pool)
	bravoBefore := rowsOf(t, pool, tables, "bravo")
	for table, n := range rowsOf(t, pool, tables, "acme") {
		if n == 0 {
			t.Fatalf("the test seeds no row of %s: add one to seeds", table)
		}
	}

	want, err := adm.TenantRows(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	got, err := adm.DeleteTenant(ctx, "test", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tables, want.Tables) {
		t.Errorf("deleted %+v; the dry run said %+v", got.Tables, want.Tables)
	}
	var listed []string
	for _, tr := range got.Tables {
		listed = append(listed, tr.Table)
	}
	slices.Sort(listed)
	if !slices.Equal(listed, tables) {
		t.Errorf("the deletion covers %v; the tables with a tenant_id are %v", listed, tables)
	}
	for table, n := range rowsOf(t, pool, tables, "acme") {
		if n != 0 {
			t.Errorf("%d rows of acme left in %s", n, table)
		}
	}
	if after := rowsOf(t, pool, tables, "bravo"); !mapsEqual(after, bravoBefore) {
		t.Errorf("bravo's rows changed: %v, before %v", after, bravoBefore)
	}
	if _, err := keysOf(adm).Authenticate(ctx, acmeSecret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("acme's key after the deletion: %v", err)
	}
	if _, err := keysOf(adm).Authenticate(ctx, bravoSecret); err != nil {
		t.Errorf("bravo's key after acme's deletion: %v", err)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A deleted tenant is gone from administration: it cannot be deleted
// again, re-created, given keys or rates, and is not listed; the default
// tenant is not deleted.
func TestDeletedTenantIsGoneFromAdministration(t *testing.T) {
	ctx := context.Background()
	adm := newKeys(t)
	mustTenant(t, adm, "acme")
	if _, err := adm.DeleteTenant(ctx, "test", "acme"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"delete again", second(adm.DeleteTenant(ctx, "test", "acme")), auth.ErrNoTenant},
		{"delete unknown", second(adm.DeleteTenant(ctx, "test", "nobody")), auth.ErrNoTenant},
		{"delete default", second(adm.DeleteTenant(ctx, "test", "default")), ErrDefaultTenant},
		{"re-create", second(adm.CreateTenant(ctx, "test", "acme", "again")), ErrTenantDeleted},
		{"re-create is a conflict", second(adm.CreateTenant(ctx, "test", "acme", "again")), ErrTenantExists},
		{"create key", third(adm.CreateKey(ctx, "test", "acme", auth.RoleWriter, nil)), auth.ErrNoTenant},
		{"set rate", adm.SetRate(ctx, "test", "acme", Rate{PerSec: 1, Burst: 1}), auth.ErrNoTenant},
		{"read rate", second(adm.TenantRate(ctx, "acme")), auth.ErrNoTenant},
		{"dry run", second(adm.TenantRows(ctx, "acme")), auth.ErrNoTenant},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, tt.err, tt.want)
		}
	}
	tenants, err := adm.ListTenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range tenants {
		if tn.ID == "acme" {
			t.Error("ListTenants lists the deleted tenant")
		}
	}
	entries, err := adm.Audit(ctx, "acme", 1)
	if err != nil || len(entries) != 1 || entries[0].Action != "tenant.delete" {
		t.Fatalf("audit = %+v, %v; want tenant.delete", entries, err)
	}
}

func second[T any](_ T, err error) error        { return err }
func third[T, U any](_ T, _ U, err error) error { return err }

// Every server hears of the deletion: the tenant on its channel, each of
// its keys on the keys' channel.
func TestWatchReportsDeletions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	adm := newKeys(t)
	mustTenant(t, adm, "acme")
	key, _ := mustKey(t, adm, "acme", auth.RoleReader, nil)
	tenants, keys := make(chan string, 8), make(chan string, 8)
	done := make(chan error, 2)
	go func() { done <- adm.WatchTenants(ctx, func(id string) { tenants <- id }) }()
	go func() { done <- keysOf(adm).Watch(ctx, func(id string) { keys <- id }) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("watch: %v", err)
			}
		}
	})
	for _, ch := range []chan string{tenants, keys} {
		if got := <-ch; got != "" {
			t.Fatalf("first change = %q, want the re-check-all signal", got)
		}
	}
	if _, err := adm.DeleteTenant(ctx, "test", "acme"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ch   chan string
		want string
	}{{tenants, "acme"}, {keys, key.ID}} {
		select {
		case got := <-c.ch:
			if got != c.want {
				t.Errorf("notified %q, want %q", got, c.want)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("no notification of %q", c.want)
		}
	}
}

// PurgeDeleted removes rows a write in flight added after the deletion,
// and never a live tenant's.
func TestPurgeDeletedRemovesLateRowsOnly(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	adm := New(pool, nil)
	mustTenant(t, adm, "acme")
	mustTenant(t, adm, "bravo")
	if _, err := adm.DeleteTenant(ctx, "test", "acme"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"acme", "bravo"} {
		if _, err := pool.Exec(ctx, `INSERT INTO cards (tenant_id, card_id) VALUES ($1, 'late')`, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"bravo", "acme", ""} {
		if _, err := adm.PurgeDeleted(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]int64{"acme": 0, "bravo": 1} {
		if got := rowsOf(t, pool, []string{"cards"}, id)["cards"]; got != want {
			t.Errorf("%s's cards after the purges: %d, want %d", id, got, want)
		}
	}
	deleted, err := adm.DeletedTenants(ctx)
	if err != nil || len(deleted) != 1 || deleted[0].ID != "acme" || deleted[0].No == 0 {
		t.Errorf("DeletedTenants = %v, %v", deleted, err)
	}
}
