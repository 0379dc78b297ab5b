package analytics_test

import (
	"fmt"
	"testing"

	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// rollupTables are the rollups the projector keeps, each dumped in its key
// order.
var rollupTables = []struct{ name, order string }{
	{"analytics_daily", "tenant_id, day, type_id, type_version"},
	{"analytics_children", "tenant_id, turn_id"},
	{"analytics_usage", "tenant_id"},
	{"analytics_keyed", "tenant_id, context_id, day"},
	{"analytics_context_turns", "tenant_id, context_id"},
}

// rollups returns every rollup table's rows as text.
func (h *harness) rollups() map[string]string {
	h.t.Helper()
	out := map[string]string{}
	for _, r := range rollupTables {
		out[r.name] = h.sqlText(fmt.Sprintf("SELECT coalesce(string_agg(r::text, ' ' ORDER BY %s), '') FROM %s r", r.order, r.name))
	}
	return out
}

// writeB appends context B's turns: a branch (two children of one turn),
// keyed and unkeyed appends, a typed item and a type the registry does
// not know (projected without data). It returns B's context and the turn
// a fork may start from.
func (h *harness) writeB() (ctx, forkFrom uint64) {
	h.t.Helper()
	b := h.newContext(h.tenant, 0)
	t1 := h.appendJSON(h.tenant, b, 0, "b-1", `{"item_type":"user_input","user_input":{"text":"hello"}}`)
	t2 := h.appendJSON(h.tenant, b, t1, "", `{"item_type":"user_input","user_input":{"text":"branch one"}}`)
	h.appendJSON(h.tenant, b, t1, "b-3", `{"item_type":"user_input","user_input":{"text":"branch two"}}`)
	h.appendRaw(h.tenant, b, "test.Unknown", 1, []byte{0x81, 0xa1, 'k', 0x01})
	return b, t2
}

// The reaper takes a deleted context's dead turns out of every rollup and
// their tool call rows with them: a store that wrote two contexts and
// deleted one has the rollups of a store where only the other was ever
// written, though the deleted one was forked from it (its first turn made
// a branch point of a live turn).
func TestReapedTurnsLeaveRollups(t *testing.T) {
	t.Parallel()
	want := newHarness(t, harnessOptions{pool: pgtest.NewPool(t)})
	want.publish(want.tenant)
	want.writeB()
	want.waitProjected(4)

	h := newHarness(t, harnessOptions{pool: pgtest.NewPool(t)})
	h.publish(h.tenant)
	_, forkFrom := h.writeB()
	a := h.newContext(h.tenant, forkFrom)
	a1 := h.appendJSON(h.tenant, a, 0, "a-1", `{"item_type":"user_input","user_input":{"text":"dies"}}`)
	h.appendJSON(h.tenant, a, a1, "a-2", `{"item_type":"user_input","user_input":{"text":"dies too"}}`)
	h.appendJSON(h.tenant, a, forkFrom, "", `{"item_type":"user_input","user_input":{"text":"another branch"}}`)
	h.appendRaw(h.tenant, a, "test.Unknown", 1, []byte{0x81, 0xa1, 'k', 0x02})
	h.appendRaw(h.tenant, a, "test.Dying", 2, []byte{0x81, 0xa1, 'k', 0x03})
	h.appendJSON(h.tenant, a, 0, "", canonicalItems["assistant_turn"])
	h.appendJSON(h.tenant, a, 0, "", canonicalItems["tool_call"])
	h.waitProjected(11)
	if n := h.count("SELECT count(*) FROM analytics_tool_call_rows"); n != 3 {
		t.Fatalf("%d tool call rows before the deletion, want 3", n)
	}
	before := h.rollups()
	if before["analytics_daily"] == want.rollups()["analytics_daily"] {
		t.Fatalf("the deleted context's turns are not counted before its deletion: %v", before)
	}

	if err := h.engine.DeleteContext(h.ctx, h.tenant, a, "test"); err != nil {
		t.Fatal(err)
	}
	stats, err := h.engine.ReapDeleted(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := h.count("SELECT count(*) FROM dead_turns"); n != 7 {
		t.Fatalf("%d dead turns, want 7 (reaped %+v)", n, stats)
	}
	if n := h.count("SELECT count(*) FROM analytics_tool_call_rows"); n != 0 {
		t.Errorf("%d tool call rows of dead turns left", n)
	}
	got, wantRollups := h.rollups(), want.rollups()
	for _, r := range rollupTables {
		if got[r.name] != wantRollups[r.name] {
			t.Errorf("%s after the reaper:\n got %s\nwant %s", r.name, got[r.name], wantRollups[r.name])
		}
	}
}
