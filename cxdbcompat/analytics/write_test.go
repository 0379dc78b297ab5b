package analytics

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/store"
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
	tenant := store.Tenant{ID: "default", No: 1}
	turn := func(gen uint64, data string) []row {
		return []row{{job: job{tenant: tenant, turnID: 1, typeID: "t", typeVersion: 1}, Projected: Projected{Data: []byte(data)}, generation: gen}}
	}
	two := `{"item_type":"assistant_turn","turn":{"tool_calls":[{"id":"a","name":"x","status":"complete","duration_ms":"oops"},{"id":"b","name":"y","status":"error"}]}}`
	one := `{"item_type":"assistant_turn","turn":{"tool_calls":[{"id":"c","name":"z","status":"complete","duration_ms":5}]}}`
	for _, w := range []struct {
		gen  uint64
		data string
		want string
	}{
		{1, two, "0:a:x:f:<nil> 1:b:y:t:<nil>"},
		{2, one, "0:c:z:f:5"},
		{1, two, "0:c:z:f:5"}, // an older registry's projection does not replace a newer one's
	} {
		if err := p.write(ctx, turn(w.gen, w.data)); err != nil {
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
	tenant := store.Tenant{ID: "default", No: 1}
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
