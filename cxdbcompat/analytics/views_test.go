package analytics_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
)

// viewData is what the view tests write: a conversation with tool calls,
// a fork, an idempotent replay, and another tenant's turn.
type viewData struct {
	h                      *harness
	other                  ident.Tenant
	ctxA, ctxB, ctxO       uint64
	a1, a2, a3, a4, a5, b1 uint64
	o1                     uint64
}

func newViewData(t *testing.T) *viewData {
	t.Helper()
	h := newHarness(t, harnessOptions{})
	other := seed.StoreTenant(t, h.pool, h.engine, "other")
	v := &viewData{h: h, other: other}
	h.publish(h.tenant)
	v.ctxA = h.newContext(h.tenant, 0)
	v.a1 = h.appendJSON(h.tenant, v.ctxA, 0, "", canonicalItems["user_input"])
	v.a2 = h.appendJSON(h.tenant, v.ctxA, 0, "", canonicalItems["assistant_turn"])
	v.ctxB = h.newContext(h.tenant, v.a2)
	v.a3 = h.appendJSON(h.tenant, v.ctxA, 0, "", canonicalItems["tool_call"])
	v.a4 = h.appendJSON(h.tenant, v.ctxA, 0, "", canonicalItems["tool_result"])
	v.b1 = h.appendJSON(h.tenant, v.ctxB, 0, "", `{"item_type":"user_input","user_input":{"text":"other branch"}}`)
	v.a5 = h.appendJSON(h.tenant, v.ctxA, 0, "k1", `{"item_type":"system","system":{"kind":"info","content":"once"}}`)
	if replay := h.appendJSON(h.tenant, v.ctxA, 0, "k1", `{"item_type":"system","system":{"kind":"info","content":"once"}}`); replay != v.a5 {
		t.Fatalf("replay appended turn %d, want %d", replay, v.a5)
	}
	v.ctxO = h.newContext(other, 0)
	v.o1 = h.appendRaw(other, v.ctxO, "cxdb.ConversationItem", 3, fixturePayload(t))
	h.waitProjected(7)
	h.waitFor("chain roots", func() bool {
		return h.count("SELECT count(*) FROM contexts WHERE root_turn_id <> 0") == 3
	})
	return v
}

// rows runs sql and returns its rows as strings, one per row, columns
// separated by " | ".
func (v *viewData) rows(t *testing.T, sql string, args ...any) []string {
	t.Helper()
	rows, err := v.h.pool.Query(v.h.ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		vals, err := r.Values()
		s := ""
		for i, val := range vals {
			if i > 0 {
				s += " | "
			}
			s += fmt.Sprint(val)
		}
		return s, err
	})
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

func (v *viewData) expect(t *testing.T, name string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", name, got, want)
	}
}

func TestViews(t *testing.T) {
	v := newViewData(t)
	d := func(id uint64) string { return fmt.Sprint(id) }

	v.expect(t, "turns per type per day", v.rows(t, `
		SELECT tenant_id, type_id, type_version, turns FROM analytics_turns_per_type_day
		WHERE day = (now() AT TIME ZONE 'UTC')::date ORDER BY tenant_id`),
		[]string{"default | cxdb.ConversationItem | 3 | 6", "other | cxdb.ConversationItem | 3 | 1"})

	v.expect(t, "context depth and fan-out", v.rows(t, `
		SELECT context_id, head_depth, base_turn_id, forked_from_context_id, turns_appended, forks
		FROM analytics_context_shape WHERE tenant_id = 'default' ORDER BY context_id`),
		[]string{d(v.ctxA) + " | 5 | 0 | <nil> | 5 | 1", d(v.ctxB) + " | 3 | " + d(v.a2) + " | " + d(v.ctxA) + " | 1 | 0"})

	v.expect(t, "fork points", v.rows(t, `
		SELECT turn_id, context_id, depth, child_turns, forked_context_ids FROM analytics_fork_points
		WHERE tenant_id = 'default'`),
		[]string{d(v.a2) + " | " + d(v.ctxA) + " | 2 | 2 | [" + d(v.ctxB) + "]"})

	v.expect(t, "tool calls", v.rows(t, `
		SELECT turn_id, source, call_id, name, status, failed, error_message, duration_ms FROM analytics_tool_calls
		WHERE tenant_id = 'default' ORDER BY turn_id, call_id`),
		[]string{
			d(v.a2) + " | assistant_turn | c1 | read_file | complete | false | <nil> | 12",
			d(v.a2) + " | assistant_turn | c2 | run | error | true | boom | <nil>",
			d(v.a4) + " | tool_result | L1 | grep | <nil> | true | no match | 7",
		})

	v.expect(t, "tool call failures", v.rows(t, `
		SELECT name, count(*) FILTER (WHERE failed), count(*) FROM analytics_tool_calls
		WHERE tenant_id = 'default' GROUP BY name ORDER BY name`),
		[]string{"grep | 1 | 1", "read_file | 0 | 1", "run | 1 | 1"})

	v.expect(t, "idempotent appends", v.rows(t, `
		SELECT context_id, keyed_appends, keys_held FROM analytics_idempotency WHERE tenant_id = 'default'`),
		[]string{d(v.ctxA) + " | 1 | 1"})

	v.expect(t, "storage per tenant", v.rows(t, `
		SELECT tenant_id, turns, contexts, payload_bytes, turn_data_bytes FROM analytics_storage
		WHERE tenant_id IN ('default', 'other') ORDER BY tenant_id`),
		[]string{
			"default | 6 | 2 | " + v.h.sqlText("SELECT sum(uncompressed_len) FROM turns WHERE tenant_id = 'default'") +
				" | " + v.h.sqlText("SELECT sum(pg_column_size(data)) FROM turn_data WHERE tenant_id = 'default'"),
			"other | 1 | 1 | " + v.h.sqlText("SELECT sum(uncompressed_len) FROM turns WHERE tenant_id = 'other'") + " | 0",
		})
}

func TestLineage(t *testing.T) {
	v := newViewData(t)
	d := func(id uint64) string { return fmt.Sprint(id) }
	v.expect(t, "lineage", v.rows(t, `
		SELECT turn_id, parent_turn_id, depth, context_id, chain_root_turn_id, forked_context_ids
		FROM analytics_lineage WHERE tenant_id = 'default' AND turn_id = ANY($1) ORDER BY turn_id`, []int64{int64(v.a2), int64(v.b1)}),
		[]string{
			d(v.a2) + " | " + d(v.a1) + " | 2 | " + d(v.ctxA) + " | " + d(v.a1) + " | [" + d(v.ctxB) + "]",
			d(v.b1) + " | " + d(v.a2) + " | 3 | " + d(v.ctxB) + " | " + d(v.a1) + " | []",
		})
	v.expect(t, "chain", v.rows(t, `SELECT turn_id, depth, context_id FROM analytics_chain('default', $1)`, int64(v.b1)),
		[]string{
			d(v.b1) + " | 3 | " + d(v.ctxB),
			d(v.a2) + " | 2 | " + d(v.ctxA),
			d(v.a1) + " | 1 | " + d(v.ctxA),
		})
}

// The views are security_invoker: row-level security holds whoever
// queries them to their own rows.
func TestViewsApplyRowSecurity(t *testing.T) {
	v := newViewData(t)
	// Only the analyst may read the views; a test grant lets the request
	// role, whose policy names one tenant, show what a tenant sees.
	if _, err := v.h.pool.Exec(v.h.ctx, "GRANT SELECT ON analytics_storage, analytics_turns_per_type_day, analytics_lineage, analytics_usage, analytics_daily TO cardbox_tenant"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tenant, sql string
		want        []string
	}{
		{"other", "SELECT tenant_id, turns FROM analytics_storage", []string{"other | 1"}},
		{"other", "SELECT tenant_id, turns FROM analytics_turns_per_type_day", []string{"other | 1"}},
		{"default", "SELECT DISTINCT tenant_id FROM analytics_lineage", []string{"default"}},
		{"", "SELECT tenant_id FROM analytics_lineage", nil},
	} {
		rows, err := pgrole.As(v.h.pool, pgrole.Tenant, tc.tenant).Query(v.h.ctx, tc.sql)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			vals, err := r.Values()
			s := fmt.Sprint(vals[0])
			if len(vals) > 1 {
				s += " | " + fmt.Sprint(vals[1])
			}
			return s, err
		})
		if err != nil {
			t.Fatal(err)
		}
		v.expect(t, fmt.Sprintf("tenant %q: %s", tc.tenant, tc.sql), got, tc.want)
	}
	// The analyst role reads the views; without a policy of its own on
	// the tables under them it sees no rows at all. (The owner is no
	// member of it: the test server's superuser takes it.)
	super := pgtest.SuperuserPool(t, v.h.pool.Config().ConnConfig.Database)
	rows, err := pgrole.As(super, "cardbox_analyst", "").Query(v.h.ctx, "SELECT count(*) FROM analytics_lineage")
	if err != nil {
		t.Fatal(err)
	}
	n, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[int64])
	if err != nil || n != 0 {
		t.Errorf("analyst without a policy saw %d lineage rows (%v), want 0", n, err)
	}
}
