package analytics_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cxdbcompat/analytics"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/cxdbcompat/turnpage"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/metastore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// harness is the store on real files and a fresh database, the CXDB
// service and a projector, wired as cardboxd wires them.
type harness struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	dir    string
	engine *store.Engine
	svc    *service.Service
	proj   *analytics.Projector
	tenant ident.Tenant
	stop   func()
}

// harnessOptions vary the harness.
type harnessOptions struct {
	opts     analytics.Options // Source and Pool are filled in
	noRun    bool              // do not start the projector (nor the service's worker)
	pool     *pgxpool.Pool     // reuse a database (a restart)
	dir      string            // reuse a data directory
	noListen bool              // the store does not tell the projector of appends
	payloads int               // the store's OnAppendPayloads
	// wrap, if set, wraps the projector's Source
	wrap func(analytics.Source) analytics.Source
}

// newHarness starts the real server (internal/daemon) when o asks for
// nothing its configuration cannot say, so that a test of projection over
// a running server runs the server's wiring; a test that drives the
// projector by hand (not started, not told of appends, its source
// wrapped, its batch, queue or clock changed) gets the pieces wired here.
func newHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	if o.isServer() {
		return newServerHarness(t, o)
	}
	h := &harness{t: t, ctx: context.Background(), pool: o.pool, dir: o.dir}
	if h.pool == nil {
		h.pool = pgtest.NewPool(t)
	}
	if h.dir == "" {
		h.dir = t.TempDir()
	}
	var mu sync.Mutex // the store may commit before h.proj is set
	engine, err := store.Open(h.ctx, store.Options{Dir: h.dir, Pool: h.pool, OnAppendPayloads: o.payloads, OnAppend: func(a []store.Appended) {
		h.svc.Appended(a)
		mu.Lock()
		defer mu.Unlock()
		if !o.noListen {
			h.proj.Appended(a)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.engine = engine
	mu.Lock()
	h.svc = service.New(engine, metastore.New(h.pool, 0, engine), service.Options{OnPublish: func(t ident.Tenant) { h.proj.Published(t) }})
	o.opts.Source, o.opts.Pool = h.svc, h.pool
	if o.wrap != nil {
		o.opts.Source = o.wrap(h.svc)
	}
	h.proj = analytics.New(o.opts)
	mu.Unlock()
	if h.tenant, err = engine.Tenant(h.ctx, ident.DefaultTenantID); err != nil {
		t.Fatal(err)
	}
	h.stop = func() { engine.Close() }
	if !o.noRun {
		h.run()
	}
	t.Cleanup(func() { h.stop() })
	return h
}

// isServer reports whether o is a server's configuration: the projector
// running and told of every append, nothing in its options but the
// largest payload it projects.
func (o harnessOptions) isServer() bool {
	p := o.opts
	return !o.noRun && !o.noListen && o.wrap == nil && o.payloads == 0 &&
		p.Source == nil && p.Pool == nil && p.QueueSize == 0 && p.QueuePayloads == 0 &&
		p.Batch == 0 && p.Linger == 0 && p.Logger == nil && p.Now == nil
}

// newServerHarness starts the daemon on o's database and data directory
// (fresh ones when unset); h.stop shuts it down.
func newServerHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	cfg := daemontest.Config(t)
	cfg.Pool = cmp.Or(o.pool, pgtest.NewPool(t))
	cfg.DataDir = cmp.Or(o.dir, cfg.DataDir)
	if o.opts.MaxPayload != 0 {
		cfg.AnalyticsMaxPayload = o.opts.MaxPayload
	}
	d := daemontest.Start(t, cfg)
	h := &harness{
		t: t, ctx: context.Background(), pool: cfg.Pool, dir: cfg.DataDir,
		engine: d.Store(), svc: d.CXDB(), proj: d.Projector(),
	}
	var err error
	if h.tenant, err = h.engine.Tenant(h.ctx, ident.DefaultTenantID); err != nil {
		t.Fatal(err)
	}
	h.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("shut the daemon down: %v", err)
		}
	}
	return h
}

// run starts the projector and the service's metadata worker; h.stop ends
// them, then closes the store.
func (h *harness) run() {
	ctx, cancel := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = h.proj.Run(ctx) })
	wg.Go(func() { _ = h.svc.Run(ctx) })
	closeStore := h.stop
	h.stop = func() { cancel(); wg.Wait(); closeStore() }
}

func (h *harness) publish(t ident.Tenant) {
	h.t.Helper()
	if _, err := h.svc.PublishBundle(h.ctx, t, "", registry.ConversationBundle); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) newContext(t ident.Tenant, base uint64) uint64 {
	h.t.Helper()
	head, err := h.svc.CreateContext(h.ctx, t, base, "")
	if err != nil {
		h.t.Fatal(err)
	}
	return head.ContextID
}

// appendJSON appends a conversation item given as JSON (the type must be
// published).
func (h *harness) appendJSON(t ident.Tenant, contextID, parent uint64, key, data string) uint64 {
	h.t.Helper()
	res, err := h.svc.AppendJSON(h.ctx, t, service.JSONAppend{
		ContextID: contextID, ParentTurnID: parent, TypeID: "cxdb.ConversationItem", TypeVersion: 3,
		Data: json.RawMessage(data), IdempotencyKey: key,
	})
	if err != nil {
		h.t.Fatalf("append %s: %v", data, err)
	}
	return res.TurnID
}

// appendRaw appends payload bytes as they are.
func (h *harness) appendRaw(t ident.Tenant, contextID uint64, typeID string, version uint32, payload []byte) uint64 {
	h.t.Helper()
	res, err := h.svc.Append(h.ctx, t, &store.AppendRequest{
		ContextID: contextID, TypeID: typeID, TypeVersion: version, Encoding: 1,
		UncompressedLen: uint32(len(payload)), ContentHash: ident.HashOf(payload), Payload: payload,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return res.TurnID
}

// count runs a query returning one integer.
func (h *harness) count(sql string, args ...any) int64 {
	h.t.Helper()
	var n int64
	if err := h.pool.QueryRow(h.ctx, sql, args...).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// sqlText runs a query returning one value and returns it as text.
func (h *harness) sqlText(sql string) string {
	h.t.Helper()
	var s string
	if err := h.pool.QueryRow(h.ctx, "SELECT ("+sql+")::text").Scan(&s); err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// waitFor polls cond for up to 20 s.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	waitfor.True(h.t, what, 20*time.Second, cond)
}

// waitProjected waits until n turns have turn_data rows.
func (h *harness) waitProjected(n int64) {
	h.t.Helper()
	h.waitFor(fmt.Sprintf("%d turn_data rows", n), func() bool { return h.count("SELECT count(*) FROM turn_data") >= n })
}

// data returns a turn's stored data (nil for NULL) and skipped reason.
func (h *harness) data(t ident.Tenant, turn uint64) (data []byte, skipped string) {
	h.t.Helper()
	var s *string
	if err := h.pool.QueryRow(h.ctx, "SELECT data, skipped FROM turn_data WHERE tenant_id = $1 AND turn_id = $2",
		t.ID, int64(turn)).Scan(&data, &s); err != nil {
		h.t.Fatalf("turn_data of turn %d: %v", turn, err)
	}
	if s != nil {
		skipped = *s
	}
	return data, skipped
}

// typedView returns the data the HTTP typed view shows for each turn of a
// context, by turn id.
func (h *harness) typedView(t ident.Tenant, contextID uint64) map[string]json.RawMessage {
	h.t.Helper()
	page, err := turnpage.New(h.svc, -1).Turns(h.ctx, t, contextID, service.TurnQuery{Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, raw := range page.Turns {
		var turn struct {
			TurnID string          `json:"turn_id"`
			Data   json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(raw, &turn); err != nil {
			h.t.Fatal(err)
		}
		out[turn.TurnID] = turn.Data
	}
	return out
}

// sameJSON compares two JSON texts as values.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return fmt.Sprint(va) == fmt.Sprint(vb)
}
