package analytics

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// seedTurns writes turns 1..n of the default tenant's context 1, as the
// tables' owner.
func seedTurns(t *testing.T, pool interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		INSERT INTO contexts (tenant_id, context_id) VALUES ('default', 1);
		INSERT INTO turns (tenant_id, turn_id, context_id, parent_turn_id, depth, type_id, type_version, encoding,
		                   compression, uncompressed_len, payload_hash, created_at)
		SELECT 'default', g, 1, g - 1, g, 't', 1, 1, 0, 2, '\x00', now() FROM generate_series(1, `+strconv.Itoa(n)+`) g`)
	if err != nil {
		t.Fatal(err)
	}
}

// A rewritten row's tool calls replace the old ones, fewer included; the
// rollups count the turn once.
func TestRewrittenToolCalls(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	seedTurns(t, pool, 1)
	p := New(Options{Pool: pool})
	tenant := ident.Tenant{ID: "default", No: 1}
	turn := func(gen uint64, data string, again bool) []row {
		return []row{{job: job{tenant: tenant, turnID: 1, typeID: "t", typeVersion: 1, turn: turnFields{contextID: 1}},
			Projected: Projected{Data: []byte(data)}, generation: gen, reprojection: again}}
	}
	two := `{"item_type":"assistant_turn","turn":{"tool_calls":[{"id":"a","name":"x","status":"complete","duration_ms":"oops"},{"id":"b","name":"y","status":"error"}]}}`
	one := `{"item_type":"assistant_turn","turn":{"tool_calls":[{"id":"c","name":"z","status":"complete","duration_ms":5}]}}`
	for _, w := range []struct {
		gen   uint64
		data  string
		again bool // a re-projection, not the turn's first
		want  string
	}{
		{1, two, false, "0:a:x:f:<nil> 1:b:y:t:<nil>"},
		{1, two, false, "0:a:x:f:<nil> 1:b:y:t:<nil>"}, // a first projection again (catch-up and queue): no change
		{2, one, true, "0:c:z:f:5"},
		{1, two, true, "0:c:z:f:5"}, // an older registry's projection does not replace a newer one's
	} {
		if err := p.write(ctx, turn(w.gen, w.data, w.again)); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := pool.QueryRow(ctx, `SELECT string_agg(concat_ws(':', idx, call_id, name, failed, coalesce(duration_ms::text, '<nil>')), ' ' ORDER BY idx)
			FROM analytics_tool_call_rows`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != w.want {
			t.Errorf("after generation %d: calls %q, want %q", w.gen, got, w.want)
		}
	}
	var turns int64
	if err := pool.QueryRow(ctx, "SELECT turns FROM analytics_usage WHERE tenant_id = 'default'").Scan(&turns); err != nil || turns != 1 {
		t.Errorf("analytics_usage turns %d (%v), want 1", turns, err)
	}
}

// A row Postgres refuses for its data keeps only its metadata; the rows
// written with it are not held back.
func TestRefusedRowKeepsMetadataOnly(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	seedTurns(t, pool, 2)
	p := New(Options{Pool: pool})
	tenant := ident.Tenant{ID: "default", No: 1}
	rows := []row{
		{job: job{tenant: tenant, turnID: 1, typeID: "t", typeVersion: 1}, Projected: Projected{Data: []byte(`{"a":1}`)}},
		{job: job{tenant: tenant, turnID: 2, typeID: "t", typeVersion: 1}, Projected: Projected{Data: []byte(`{"a":`)}},
	}
	if err := p.write(ctx, rows); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := pool.QueryRow(ctx, `SELECT string_agg(turn_id || ':' || coalesce(data::text, skipped), ' ' ORDER BY turn_id) FROM turn_data`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := `1:{"a": 1} 2:undecodable`; got != want {
		t.Errorf("turn_data %q, want %q", got, want)
	}
}

// A tenant deleted while a batch of its turns waits to be written keeps
// none of them: the batch waits for the deletion's lock on the tenant's
// row, then leaves the tenant out and writes the others' turns, whether
// it inserts first projections or upserts re-projections.
func TestWriteLeavesOutTenantDeletedMeanwhile(t *testing.T) {
	for _, again := range []bool{false, true} {
		t.Run(map[bool]string{false: "first", true: "again"}[again], func(t *testing.T) { writeBesideDeletion(t, again) })
	}
}

func writeBesideDeletion(t *testing.T, again bool) {
	t.Helper()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	seedTurns(t, pool, 1)
	_, err := pool.Exec(ctx, `
		INSERT INTO tenants (tenant_id) VALUES ('acme');
		INSERT INTO contexts (tenant_id, context_id) VALUES ('acme', 2);
		INSERT INTO turns (tenant_id, turn_id, context_id, parent_turn_id, depth, type_id, type_version, encoding,
		                   compression, uncompressed_len, payload_hash, created_at)
		VALUES ('acme', 2, 2, 0, 1, 't', 1, 1, 0, 2, '\x00', now())`)
	if err != nil {
		t.Fatal(err)
	}
	deletion, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletion.Rollback(context.Background()) })
	acme := pgtest.LockTenantForDeletion(t, deletion, "acme")

	p := New(Options{Pool: pool})
	rows := []row{
		{job: job{tenant: ident.Tenant{ID: "default", No: 1}, turnID: 1, typeID: "t", typeVersion: 1}, Projected: Projected{Data: []byte(`{}`)}, reprojection: again},
		{job: job{tenant: ident.Tenant{ID: "acme", No: uint32(acme)}, turnID: 2, typeID: "t", typeVersion: 1}, Projected: Projected{Data: []byte(`{}`)}, reprojection: again},
	}
	written := make(chan error, 1)
	go func() { written <- p.write(ctx, rows) }()
	waitfor.True(t, "the batch to wait for the deletion", 20*time.Second, func() bool {
		if len(written) > 0 {
			t.Fatalf("the batch did not wait: %v", <-written)
		}
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%name: HoldOffTenantDeletion%'`).Scan(&n)
		return err == nil && n > 0
	})
	for _, q := range []string{
		"UPDATE tenants SET deleted_at = now() WHERE tenant_id = 'acme'",
		"DELETE FROM turns WHERE tenant_id = 'acme'",
		"DELETE FROM contexts WHERE tenant_id = 'acme'",
	} {
		if _, err := deletion.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := deletion.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	var got string
	err = pool.QueryRow(ctx, `SELECT (SELECT string_agg(tenant_id || ':' || turn_id, ' ') FROM turn_data) || ' / ' ||
		(SELECT string_agg(tenant_id, ' ') FROM analytics_usage)`).Scan(&got)
	if err != nil {
		t.Fatal(err)
	}
	if want := "default:1 / default"; got != want {
		t.Errorf("turn_data / analytics_usage tenants: %q, want %q", got, want)
	}
}

// analytics_children has a row for each turn with more than one child,
// counting the children written in earlier batches and in the same one.
func TestChildrenCountedFromTheSecond(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	parents := map[uint64]uint64{1: 0, 2: 1, 3: 1, 4: 1, 5: 2, 6: 2, 7: 6}
	_, err := pool.Exec(ctx, `
		INSERT INTO contexts (tenant_id, context_id) VALUES ('default', 1);
		INSERT INTO turns (tenant_id, turn_id, context_id, parent_turn_id, depth, type_id, type_version, encoding,
		                   compression, uncompressed_len, payload_hash, created_at)
		SELECT 'default', id, 1, parent, 0, 't', 1, 1, 0, 2, '\x00', now()
		FROM (VALUES (1, 0), (2, 1), (3, 1), (4, 1), (5, 2), (6, 2), (7, 6)) AS v (id, parent)`)
	if err != nil {
		t.Fatal(err)
	}
	p := New(Options{Pool: pool})
	for _, step := range []struct {
		turns []uint64
		want  string
	}{
		{[]uint64{1, 2}, ""},           // a chain
		{[]uint64{3}, "1:2"},           // turn 1's second child, a batch later
		{[]uint64{4}, "1:3"},           // and its third
		{[]uint64{5, 6, 7}, "1:3 2:2"}, // two children of turn 2 in one batch
	} {
		var rows []row
		for _, id := range step.turns {
			j := job{tenant: ident.Tenant{ID: "default", No: 1}, turnID: id, typeID: "t", typeVersion: 1, turn: turnFields{contextID: 1, parentID: parents[id]}}
			rows = append(rows, row{job: j, Projected: Projected{Data: []byte(`{}`)}})
		}
		if err := p.write(ctx, rows); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := pool.QueryRow(ctx, `SELECT coalesce(string_agg(turn_id || ':' || children, ' ' ORDER BY turn_id), '') FROM analytics_children`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != step.want {
			t.Errorf("after turns %v: children %q, want %q", step.turns, got, step.want)
		}
	}
	var points string
	if err := pool.QueryRow(ctx, `SELECT string_agg(turn_id || ':' || child_turns, ' ' ORDER BY turn_id) FROM analytics_fork_points`).Scan(&points); err != nil {
		t.Fatal(err)
	}
	if want := "1:3 2:2"; points != want {
		t.Errorf("fork points %q, want %q", points, want)
	}
}
