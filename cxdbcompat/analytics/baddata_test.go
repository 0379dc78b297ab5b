package analytics_test

import (
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/analytics"
)

// A bundle whose type id Postgres cannot store (a NUL: stored before the
// HTTP API refused it) does not fail the tenant's backfill, which would
// then be retried for ever: the type is left out and counted, the other
// types are backfilled.
func TestBackfillLeavesOutTypeIDsPostgresCannotStore(t *testing.T) {
	h := newHarness(t, harnessOptions{noRun: true, noListen: true})
	c := h.newContext(h.tenant, 0)
	h.appendRaw(h.tenant, c, "cxdb.ConversationItem", 3, fixturePayload(t))
	if err := h.proj.CatchUp(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.publish(h.tenant)
	bad := `{"registry_version":1,"bundle_id":"bad","types":{"t\u0000x":{"versions":{"1":{"fields":{"1":{"name":"a","type":"string"}}}}}}}`
	if _, err := h.svc.PublishBundle(h.ctx, h.tenant, "", []byte(bad)); err != nil {
		t.Fatal(err)
	}
	var last analytics.Progress
	if err := h.proj.Backfill(h.ctx, h.tenant, func(p analytics.Progress) { last = p }); err != nil {
		t.Fatalf("backfill: %v", err)
	}
	if !last.Done || last.Reprojected != 1 {
		t.Errorf("progress %+v, want done with the one turn re-projected", last)
	}
	if n := metricValue(t, h.proj, "cardbox_analytics_type_ids_left_out_total"); n != 1 {
		t.Errorf("cardbox_analytics_type_ids_left_out_total = %v, want 1", n)
	}
}
