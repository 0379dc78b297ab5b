package analytics_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/cxdbcompat/analytics"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
)

// canonicalItems is one conversation item of every canonical type (spec
// section 9), as the HTTP API takes them.
var canonicalItems = map[string]string{
	"user_input": `{"item_type":"user_input","status":"complete","timestamp":"2026-01-02T03:04:05Z","id":"i1",
		"user_input":{"text":"What is in the report?","files":["a.txt","b.pdf"]},
		"context_metadata":{"client_tag":"t","title":"Report","labels":["env=dev"],
			"provenance":{"service_name":"svc","process_pid":42,"env":{"A":"1"}}}}`,
	"assistant_turn": `{"item_type":"assistant_turn","status":"complete",
		"turn":{"text":"Reading it.","reasoning":"need the file","agent":"main","turn_number":1,"max_turns":8,"finish_reason":"tool_use",
			"metrics":{"input_tokens":100,"output_tokens":20,"total_tokens":120,"cached_tokens":5,"model":"m-1"},
			"tool_calls":[
				{"id":"c1","name":"read_file","args":"{\"path\":\"a.txt\"}","status":"complete","duration_ms":12,
				 "result":{"content":"hello","success":true,"exit_code":0}},
				{"id":"c2","name":"run","args":"{}","status":"error","error":{"code":"EXIT","message":"boom","exit_code":2}}]}}`,
	"system":    `{"item_type":"system","system":{"kind":"warning","title":"Careful","content":"rate limited"}}`,
	"handoff":   `{"item_type":"handoff","handoff":{"from_agent":"a","to_agent":"b","tool_name":"t","input":"x","reason":"why"}}`,
	"assistant": `{"item_type":"assistant","assistant":{"text":"hi","reasoning":"r","model":"m","input_tokens":1,"output_tokens":2,"stop_reason":"end"}}`,
	"tool_call": `{"item_type":"tool_call","tool_call":{"call_id":"L1","name":"grep","args":"{}","description":"search"}}`,
	"tool_result": `{"item_type":"tool_result","tool_result":{"call_id":"L1","content":"no match","is_error":true,"exit_code":1,
		"streaming_output":"","output_truncated":false,"duration_ms":7}}`,
}

// Every canonical type lands in turn_data exactly as the typed view shows
// it, and is queryable by its fields, whether the store hands the
// projector the committed payloads or the projector reads them back.
// Besides, the projector's start-up catch-up reads each turn it finds in
// Postgres before its notification is drained (the test appends while the
// catch-up runs).
func TestProjectsEveryCanonicalTypeAsTheTypedView(t *testing.T) {
	for _, tc := range []struct {
		name      string
		payloads  int
		wantReads int64
	}{
		{"read back", 0, int64(len(canonicalItems))},
		{"handed", 64 << 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reads atomic.Int64
			h := newHarness(t, harnessOptions{payloads: tc.payloads, wrap: func(s analytics.Source) analytics.Source {
				return countingSource{Source: s, reads: &reads}
			}})
			projectsEveryCanonicalType(t, h)
			caughtUp := int64(metricValue(t, h.proj, "cardbox_analytics_caught_up_total"))
			// A turn the catch-up found is read once more by the catch-up,
			// unless its notification was drained first and projected it
			// already: which comes first is the scheduler's choice.
			if got, most := reads.Load(), tc.wantReads+caughtUp; got < tc.wantReads || got > most {
				t.Errorf("the projector read %d payloads from the store, want %d to %d (%d turns caught up)", got, tc.wantReads, most, caughtUp)
			}
		})
	}
}

// countingSource counts the payloads read through it.
type countingSource struct {
	analytics.Source
	reads *atomic.Int64
}

func (s countingSource) TurnPayload(ctx context.Context, t ident.Tenant, id uint64) ([]byte, error) {
	s.reads.Add(1)
	return s.Source.TurnPayload(ctx, t, id)
}

func projectsEveryCanonicalType(t *testing.T, h *harness) {
	t.Helper()
	h.publish(h.tenant)
	c := h.newContext(h.tenant, 0)
	ids := map[string]uint64{}
	for kind, item := range canonicalItems {
		ids[kind] = h.appendJSON(h.tenant, c, 0, "", item)
	}
	h.waitProjected(int64(len(canonicalItems)))
	view := h.typedView(h.tenant, c)
	for kind, id := range ids {
		data, skipped := h.data(h.tenant, id)
		if skipped != "" {
			t.Errorf("%s: skipped %q", kind, skipped)
			continue
		}
		if want := view[strconv.FormatUint(id, 10)]; !sameJSON(t, data, want) {
			t.Errorf("%s: turn_data\n%s\ntyped view\n%s", kind, data, want)
		}
		if got := h.count("SELECT count(*) FROM turn_data WHERE data->>'item_type' = $1 AND turn_id = $2", kind, int64(id)); got != 1 {
			t.Errorf("%s: WHERE data->>'item_type' found %d rows", kind, got)
		}
	}
	if got := h.count(`SELECT count(*) FROM turn_data WHERE data @> '{"turn":{"metrics":{"model":"m-1"}}}'`); got != 1 {
		t.Errorf("containment query found %d rows", got)
	}
}

// Strings Postgres cannot hold are cleaned: a NUL becomes U+FFFD; the
// rest of the turn is kept.
func TestNULBecomesReplacementCharacter(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.publish(h.tenant)
	c := h.newContext(h.tenant, 0)
	id := h.appendJSON(h.tenant, c, 0, "", `{"item_type":"user_input","user_input":{"text":"a\u0000b"}}`)
	h.waitProjected(1)
	var text string
	if err := h.pool.QueryRow(h.ctx, "SELECT data->'user_input'->>'text' FROM turn_data WHERE turn_id = $1", int64(id)).Scan(&text); err != nil {
		t.Fatal(err)
	}
	if text != "a\uFFFDb" {
		t.Errorf("text = %q, want a U+FFFD b", text)
	}
}

// A payload over the cap keeps only metadata.
func TestPayloadOverTheCapIsSkipped(t *testing.T) {
	h := newHarness(t, harnessOptions{opts: analytics.Options{MaxPayload: 200}})
	h.publish(h.tenant)
	c := h.newContext(h.tenant, 0)
	small := h.appendJSON(h.tenant, c, 0, "", `{"item_type":"user_input","user_input":{"text":"short"}}`)
	large := h.appendJSON(h.tenant, c, 0, "", `{"item_type":"user_input","user_input":{"text":"`+strings.Repeat("x", 300)+`"}}`)
	h.waitProjected(2)
	if data, skipped := h.data(h.tenant, small); data == nil || skipped != "" {
		t.Errorf("small turn: data %s, skipped %q", data, skipped)
	}
	if data, skipped := h.data(h.tenant, large); data != nil || skipped != analytics.SkipTooLarge {
		t.Errorf("large turn: data %s, skipped %q; want too_large", data, skipped)
	}
	if got := h.count("SELECT type_version FROM turn_data WHERE turn_id = $1", int64(large)); got != 3 {
		t.Errorf("large turn's type_version = %d", got)
	}
}

// Turns committed without turn_data rows (a crash before the projector
// wrote them) are projected by the catch-up at the next start.
func TestCatchUpAfterCrash(t *testing.T) {
	first := newHarness(t, harnessOptions{noRun: true, noListen: true})
	first.publish(first.tenant)
	c := first.newContext(first.tenant, 0)
	var ids []uint64
	for i := range 1100 { // more than two catch-up pages
		ids = append(ids, first.appendJSON(first.tenant, c, 0, "", `{"item_type":"system","system":{"kind":"info","content":"`+strconv.Itoa(i)+`"}}`))
	}
	if n := first.count("SELECT count(*) FROM turn_data"); n != 0 {
		t.Fatalf("%d rows before the restart", n)
	}
	first.stop()
	first.stop = func() {}

	h := newHarness(t, harnessOptions{pool: first.pool, dir: first.dir})
	h.waitProjected(int64(len(ids)))
	if n := h.count("SELECT count(*) FROM turn_data WHERE data IS NULL"); n != 0 {
		t.Errorf("%d rows without data", n)
	}
	if n := h.count("SELECT sum(turns) FROM analytics_daily WHERE tenant_id = 'default'"); n != int64(len(ids)) {
		t.Errorf("analytics_daily counts %d turns, want %d", n, len(ids))
	}
	if n := h.count("SELECT count(*) FROM analytics_fork_points"); n != 0 {
		t.Errorf("a straight chain has %d fork points", n)
	}
	if n := h.count("SELECT count(DISTINCT parent_turn_id) FROM turn_data WHERE parent_turn_id <> 0"); n != int64(len(ids)-1) {
		t.Errorf("%d turns are parents in turn_data, want %d", n, len(ids)-1)
	}
	h.waitFor("the watermark", func() bool {
		return h.count("SELECT coalesce(max(turn_id), 0) FROM analytics_watermarks WHERE tenant_id = 'default'") == int64(ids[len(ids)-1])
	})
}

// A deleted tenant is no part of the catch-up: its rows are gone and the
// store no longer knows it, so catching it up could only fail, and a
// failed catch-up is retried every few seconds instead of every minute.
func TestCatchUpLeavesOutDeletedTenants(t *testing.T) {
	h := newHarness(t, harnessOptions{noRun: true, noListen: true})
	acme := seed.StoreTenant(t, h.pool, h.engine, "acme")
	h.publish(acme)
	h.publish(h.tenant)
	h.appendJSON(acme, h.newContext(acme, 0), 0, "", `{"item_type":"user_input","user_input":{"text":"hi"}}`)
	c := h.newContext(h.tenant, 0)
	want := h.appendJSON(h.tenant, c, 0, "", `{"item_type":"user_input","user_input":{"text":"hi"}}`)
	deletion := pgtest.BeginDeletion(t, h.pool, "acme")
	if err := deletion.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.ForgetTenant(h.ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if err := h.proj.CatchUp(h.ctx); err != nil {
		t.Fatalf("catch-up beside a deleted tenant: %v", err)
	}
	if n := h.count("SELECT count(*) FROM turn_data WHERE tenant_id = 'default' AND turn_id = $1", int64(want)); n != 1 {
		t.Errorf("the live tenant's turn has %d rows, want 1", n)
	}
}

// A full queue drops turns and never blocks appends; catch-up finds them.
func TestDroppedTurnsAreCaughtUp(t *testing.T) {
	h := newHarness(t, harnessOptions{noRun: true, opts: analytics.Options{QueueSize: 2}})
	h.publish(h.tenant)
	c := h.newContext(h.tenant, 0)
	for range 5 {
		h.appendJSON(h.tenant, c, 0, "", `{"item_type":"user_input","user_input":{"text":"hi"}}`)
	}
	// The store tells the projector of each group after acknowledging
	// it: the last drops may come a moment after the last append returns.
	h.waitFor("three turns dropped", func() bool {
		return metricValue(t, h.proj, "cardbox_analytics_queue_dropped_total") == 3
	})
	if got := metricValue(t, h.proj, "cardbox_analytics_queue_length"); got != 2 {
		t.Errorf("queue length %v, want 2 (its size)", got)
	}
	h.run()
	h.waitProjected(5)
}

// The lag gauge is the age of the oldest unprojected committed turn, and
// returns to 0 once the projector caught up.
func TestLagGauge(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	h := newHarness(t, harnessOptions{noRun: true, opts: analytics.Options{Now: clock}})
	h.publish(h.tenant)
	c := h.newContext(h.tenant, 0)
	h.appendJSON(h.tenant, c, 0, "", `{"item_type":"user_input","user_input":{"text":"one"}}`)
	// The store tells the projector of a group after acknowledging it:
	// the turn's queued time is read when it arrives.
	h.waitFor("the first turn queued", func() bool {
		return metricValue(t, h.proj, "cardbox_analytics_queue_length") == 1
	})
	now.Add(int64(3 * time.Second))
	h.appendJSON(h.tenant, c, 0, "", `{"item_type":"user_input","user_input":{"text":"two"}}`)
	now.Add(int64(2 * time.Second))
	if got := metricValue(t, h.proj, "cardbox_analytics_lag_seconds"); got != 5 {
		t.Errorf("lag %v s, want 5 (the oldest queued turn's age)", got)
	}
	h.run()
	h.waitProjected(2)
	h.waitFor("lag 0", func() bool { return h.proj.Lag() == 0 })
	// The start's catch-up may project them too, before the queue does.
	if got := metricValue(t, h.proj, "cardbox_analytics_projected_total"); got < 2 {
		t.Errorf("projected_total %v, want at least 2", got)
	}
	// The two turns waited 5 and 2 s on the test's clock.
	if got := metricValue(t, h.proj, "cardbox_analytics_delay_seconds"); got < 2 {
		t.Errorf("delay histogram counts %v turns, want at least 2", got)
	}
	// ... but the rollups count each turn once.
	if n := h.count("SELECT turns FROM analytics_usage WHERE tenant_id = 'default'"); n != 2 {
		t.Errorf("analytics_usage counts %d turns, want 2", n)
	}
}

// metricValue gathers c and returns the value of a metric (summed over
// its labels; a histogram's count).
func metricValue(t *testing.T, c prometheus.Collector, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
		return sum
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// Turns written before their bundle was published are skipped as of an
// unknown type, and re-projected once it arrives.
func TestPublishReprojectsUnknownTypes(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	other := seed.StoreTenant(t, h.pool, h.engine, "other")
	c := h.newContext(h.tenant, 0)
	id := h.appendRaw(h.tenant, c, "cxdb.ConversationItem", 3, fixturePayload(t))
	h.waitProjected(1)
	if _, skipped := h.data(h.tenant, id); skipped != analytics.SkipUnknownType {
		t.Fatalf("skipped %q before the bundle, want unknown_type", skipped)
	}
	h.publish(other) // another tenant's bundle changes nothing here
	h.publish(h.tenant)
	h.waitFor("re-projection", func() bool { d, _ := h.data(h.tenant, id); return d != nil })
	data, _ := h.data(h.tenant, id)
	if want := h.typedView(h.tenant, c)[strconv.FormatUint(id, 10)]; !sameJSON(t, data, want) {
		t.Errorf("re-projected\n%s\ntyped view\n%s", data, want)
	}
	h.waitFor("the backfill's end", func() bool {
		return h.count("SELECT count(*) FROM analytics_backfills WHERE tenant_id = 'default' AND done_at IS NOT NULL") == 1
	})
	if got, want := h.sqlText("SELECT turns || ' ' || data_bytes FROM analytics_usage WHERE tenant_id = 'default'"),
		h.sqlText("SELECT count(*) || ' ' || sum(coalesce(pg_column_size(data), 0)) FROM turn_data WHERE tenant_id = 'default'"); got != want {
		t.Errorf("analytics_usage turns and data bytes %s, want %s (counted once, the re-projection's bytes replacing none)", got, want)
	}
}

// A backfill stopped half-way resumes from its stored cursor, and a
// finished one does nothing.
func TestBackfillResumes(t *testing.T) {
	h := newHarness(t, harnessOptions{noRun: true, noListen: true, opts: analytics.Options{Batch: 2}})
	c := h.newContext(h.tenant, 0)
	payload := fixturePayload(t)
	for range 5 {
		h.appendRaw(h.tenant, c, "cxdb.ConversationItem", 3, payload)
	}
	if err := h.proj.CatchUp(h.ctx); err != nil {
		t.Fatal(err)
	}
	if n := h.count("SELECT count(*) FROM turn_data WHERE skipped = 'unknown_type'"); n != 5 {
		t.Fatalf("%d unknown_type rows, want 5", n)
	}
	h.publish(h.tenant) // the projector is not running: nothing reacts
	ctx, cancel := context.WithCancel(h.ctx)
	err := h.proj.Backfill(ctx, h.tenant, func(p analytics.Progress) { cancel() })
	if err == nil {
		t.Fatal("backfill ran to its end despite the cancel")
	}
	if n := h.count("SELECT count(*) FROM turn_data WHERE data IS NOT NULL"); n != 2 {
		t.Fatalf("%d rows re-projected by the first page, want 2", n)
	}
	var last analytics.Progress
	if err := h.proj.Backfill(h.ctx, h.tenant, func(p analytics.Progress) { last = p }); err != nil {
		t.Fatal(err)
	}
	if !last.Done || last.Reprojected != 5 || last.Total != 3 {
		t.Errorf("progress %+v, want done, 5 re-projected in all, 3 left when resumed", last)
	}
	if n := h.count("SELECT count(*) FROM turn_data WHERE data IS NOT NULL"); n != 5 {
		t.Errorf("%d rows with data, want 5", n)
	}
	last = analytics.Progress{}
	if err := h.proj.Backfill(h.ctx, h.tenant, func(p analytics.Progress) { last = p }); err != nil || !last.Done || last.Scanned != 0 {
		t.Errorf("a finished backfill ran again: %+v, %v", last, err)
	}
}

// fixturePayload is a user_input conversation item as the official Go
// client writes it (shared fixture msgpack_conversation_item).
func fixturePayload(t *testing.T) []byte {
	t.Helper()
	return mustHex(t, "8ca131aa757365725f696e707574a132a8636f6d706c657465a133d30000018bcfe56800a134a66974656d2d31a2313082a131b348656c6c6f2066726f6d206669787475726573a13291a866696c652e747874a23131c0a23132c0a23133c0a23230c0a23231c0a23232c0a2333085a131ab666978747572652d746167a132ad46697874757265205469746c65a13392a5616c706861a462657461a13481a3656e76a474657374a23130c0")
}
