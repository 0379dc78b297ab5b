package daemon_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/live"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/store"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// sweptByHand starts a server whose clock the test moves and that sweeps
// only when the test asks, and returns it with its clock, a context for
// the test's calls and the default tenant; configure adjusts the rest.
func sweptByHand(t *testing.T, configure func(*daemon.Config)) (*daemon.Daemon, *fakeClock, context.Context, ident.Tenant) {
	t.Helper()
	clock := &fakeClock{now: time.Now()}
	d := daemontest.New(t, func(c *daemon.Config) {
		c.Test.Now = clock.Now
		c.SweepInterval = 24 * time.Hour // the test sweeps itself
		if configure != nil {
			configure(c)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	t.Cleanup(cancel)
	ten, err := d.Store().Tenant(ctx, ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	return d, clock, ctx, ten
}

// dial opens a binary protocol client to d, closed at the test's end.
func dial(ctx context.Context, t *testing.T, d *daemon.Daemon) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx, d.BinaryAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Retention deletes the contexts its policies expire as the clock moves,
// and no other: a label's policy applies to the contexts carrying the
// label, the tenant's to all of them, and the shortest wins. What it
// deletes is deleted as DELETE /v1/contexts/{id} would (gone, and
// context_deleted published); the plan says beforehand what would go.
func TestRetentionDeletesExpiredContexts(t *testing.T) {
	d, clock, ctx, ten := sweptByHand(t, nil)
	start := clock.Now()
	c := dial(ctx, t, d)
	stream := d.CXDB().Hub().Stream
	sub := stream.Subscribe(ten.ID, stream.LastID(ten.ID))
	defer sub.Close()
	seen := &events{sub: sub, seen: map[string]bool{}}

	// newContext makes a context of two turns; the first names its labels.
	newContext := func(labels ...string) uint64 {
		t.Helper()
		head, err := c.CreateContext(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		first, err := msgpack.Marshal(map[int]any{1: "hello", 30: map[int]any{3: labels}})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range [][]byte{first, {0x81, 0x01, 0x02}} {
			if _, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: head.ContextID, TypeID: "test.Note", TypeVersion: 1, Payload: p}); err != nil {
				t.Fatal(err)
			}
		}
		if len(labels) > 0 {
			seen.wait(t, live.ContextMetadataUpdated, head.ContextID)
		}
		return head.ContextID
	}
	plain, scratch, keep := newContext(), newContext("scratch"), newContext("keep")

	adm := tenancy.New(d.Pool(), nil)
	for _, r := range []tenancy.Retention{
		{TenantID: ten.ID, MaxAge: 48 * time.Hour},
		{TenantID: ten.ID, Label: "scratch", Idle: time.Hour},
	} {
		if err := adm.SetRetention(ctx, "test", r); err != nil {
			t.Fatal(err)
		}
	}

	for _, step := range []struct {
		after       time.Duration
		wantDeleted int
		wantPlan    int64 // contexts the plan names before the sweep
		gone        []uint64
		live        []uint64
	}{
		{after: 30 * time.Minute, live: []uint64{plain, scratch, keep}},
		{after: 2 * time.Hour, wantDeleted: 1, wantPlan: 1, gone: []uint64{scratch}, live: []uint64{plain, keep}},
		{after: 47 * time.Hour, live: []uint64{plain, keep}},
		{after: 49 * time.Hour, wantDeleted: 2, wantPlan: 2, gone: []uint64{plain, keep}},
	} {
		clock.set(start.Add(step.after))
		plan, err := adm.PlanRetention(ctx, ten.ID, tenancy.Retention{}, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		var planned, turns int64
		for _, p := range plan {
			planned, turns = planned+p.Contexts, turns+p.Turns
		}
		if planned != step.wantPlan || turns != 2*step.wantPlan {
			t.Errorf("at +%v the plan names %d contexts, %d turns; want %d and %d", step.after, planned, turns, step.wantPlan, 2*step.wantPlan)
		}
		n, err := d.CXDB().SweepRetention(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != step.wantDeleted {
			t.Errorf("at +%v the sweep deleted %d contexts, want %d", step.after, n, step.wantDeleted)
		}
		for _, id := range step.gone {
			if _, err := d.Store().Context(ten, id); fault.KindOf(err) != fault.NotFound {
				t.Errorf("at +%v context %d: %v, want it deleted", step.after, id, err)
			}
			seen.wait(t, live.ContextDeleted, id)
		}
		for _, id := range step.live {
			if _, err := d.Store().Context(ten, id); err != nil {
				t.Errorf("at +%v context %d: %v, want it live", step.after, id, err)
			}
		}
	}
}

// A policy must limit something, each of its durations by at least a
// second; the error names the field at fault.
func TestRetentionPolicyChecks(t *testing.T) {
	for _, tt := range []struct {
		r    tenancy.Retention
		want string // in the error; "" for none
	}{
		{tenancy.Retention{Idle: time.Hour}, ""},
		{tenancy.Retention{MaxAge: time.Second}, ""},
		{tenancy.Retention{Idle: time.Hour, MaxAge: 24 * time.Hour}, ""},
		{tenancy.Retention{}, "give idle, max_age or both"},
		{tenancy.Retention{Idle: -time.Hour}, "idle -1h0m0s"},
		{tenancy.Retention{Idle: time.Hour, MaxAge: time.Millisecond}, "max_age 1ms"},
	} {
		err := tt.r.Check()
		if got := fmt.Sprint(err); (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(got, tt.want)) {
			t.Errorf("%+v: %v, want %q", tt.r, err, tt.want)
		}
	}
}

// events are the events of a subscription as a test waits for them.
type events struct {
	sub  *live.Subscription
	seen map[string]bool // by name and context id
}

// wait waits for the event name about context id, seen earlier or not.
func (e *events) wait(t *testing.T, name string, id uint64) {
	t.Helper()
	key := fmt.Sprint(name, "/", id)
	deadline := time.After(ioTimeout)
	for !e.seen[key] {
		select {
		case <-e.sub.Wake():
			got, _ := e.sub.Next(1024)
			for _, ev := range got {
				if data, ok := ev.Data.(map[string]any); ok {
					e.seen[fmt.Sprint(ev.Name, "/", data["context_id"])] = true
				}
			}
		case <-deadline:
			t.Fatalf("no %s event for context %d within %v", name, id, ioTimeout)
		}
	}
}

// The server's default policy (--retention-idle) applies to every tenant
// without a policy of its own for all its contexts: such a tenant's
// contexts go once idle past it, while a tenant whose own policy is
// longer keeps its contexts until that expires them. A label policy
// still applies beside the default, the shortest winning.
func TestRetentionServerDefault(t *testing.T) {
	d, clock, ctx, _ := sweptByHand(t, func(c *daemon.Config) { c.RetentionIdle = 24 * time.Hour })
	start := clock.Now()
	adm := tenancy.New(d.Pool(), nil)
	if _, err := adm.CreateTenant(ctx, "test", "acme", ""); err != nil {
		t.Fatal(err)
	}
	for _, r := range []tenancy.Retention{
		{TenantID: "acme", Idle: 10 * 24 * time.Hour},
		{TenantID: ident.DefaultTenantID, Label: "scratch", Idle: time.Hour},
	} {
		if err := adm.SetRetention(ctx, "test", r); err != nil {
			t.Fatal(err)
		}
	}
	tenant := func(id string) ident.Tenant {
		t.Helper()
		ten, err := d.Store().Tenant(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ten
	}
	dflt, acme := tenant(ident.DefaultTenantID), tenant("acme")
	newContext := func(ten ident.Tenant) uint64 {
		t.Helper()
		h, err := d.Store().CreateContext(ctx, ten, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		return h.ContextID
	}
	plain, own := newContext(dflt), newContext(acme)
	// A context of the default tenant labelled scratch, by its root's
	// metadata as a labelled first turn would leave it.
	scratch := newContext(dflt)
	c, err := client.Dial(ctx, d.BinaryAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	stream := d.CXDB().Hub().Stream
	sub := stream.Subscribe(dflt.ID, stream.LastID(dflt.ID))
	defer sub.Close()
	seen := &events{sub: sub, seen: map[string]bool{}}
	first, err := msgpack.Marshal(map[int]any{1: "hello", 30: map[int]any{3: []string{"scratch"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: scratch, TypeID: "test.Note", TypeVersion: 1, Payload: first}); err != nil {
		t.Fatal(err)
	}
	seen.wait(t, live.ContextMetadataUpdated, scratch)

	for _, step := range []struct {
		after      time.Duration
		gone, live []uint64
	}{
		{after: 30 * time.Minute, live: []uint64{plain, scratch, own}},
		{after: 2 * time.Hour, gone: []uint64{scratch}, live: []uint64{plain, own}},
		{after: 25 * time.Hour, gone: []uint64{plain}, live: []uint64{own}},
		{after: 11 * 24 * time.Hour, gone: []uint64{own}},
	} {
		clock.set(start.Add(step.after))
		plan, err := adm.PlanRetention(ctx, "", tenancy.Retention{Idle: 24 * time.Hour}, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		var planned int64
		for _, p := range plan {
			planned += p.Contexts
		}
		if planned != int64(len(step.gone)) {
			t.Errorf("at +%v the plan names %d contexts, want %d", step.after, planned, len(step.gone))
		}
		n, err := d.CXDB().SweepRetention(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(step.gone) {
			t.Errorf("at +%v the sweep deleted %d contexts, want %d", step.after, n, len(step.gone))
		}
		for _, ten := range []ident.Tenant{dflt, acme} {
			for _, id := range step.gone {
				if _, err := d.Store().Context(ten, id); err == nil {
					t.Errorf("at +%v context %d of %s is live, want it deleted", step.after, id, ten.ID)
				}
			}
		}
		for _, id := range step.live {
			ten := dflt
			if id == own {
				ten = acme
			}
			if _, err := d.Store().Context(ten, id); err != nil {
				t.Errorf("at +%v context %d of %s: %v, want it live", step.after, id, ten.ID, err)
			}
		}
	}
}

// A context that only being idle expires is spared when it is appended to
// between the sweeper's lookup and its deletion: it is no longer idle. One
// its age expires goes all the same.
func TestRetentionSparesAContextAppendedToSinceItsLookup(t *testing.T) {
	d, clock, ctx, ten := sweptByHand(t, nil)
	start := clock.Now()
	c := dial(ctx, t, d)
	appendTo := func(id uint64) {
		t.Helper()
		if _, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: id, TypeID: "test.Note", TypeVersion: 1, Payload: []byte{0x81, 0x01, 0x02}}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []uint64
	for range 2 {
		head, err := c.CreateContext(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		appendTo(head.ContextID)
		ids = append(ids, head.ContextID)
	}
	idle, aged := ids[0], ids[1]
	adm := tenancy.New(d.Pool(), nil)
	if err := adm.SetRetention(ctx, "test", tenancy.Retention{TenantID: ten.ID, Idle: time.Hour}); err != nil {
		t.Fatal(err)
	}
	clock.set(start.Add(2 * time.Hour))
	expired, err := d.Store().ExpiredContexts(ctx, clock.Now(), store.DefaultRetention{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(expired) != 2 {
		t.Fatalf("the lookup found %d expired contexts, want 2", len(expired))
	}
	for i := range expired {
		if expired[i].IdleSince.IsZero() {
			t.Errorf("context %d: the idle policy expires it, but no last append was noted", expired[i].ContextID)
		}
		if expired[i].ContextID == aged {
			expired[i].IdleSince = time.Time{} // as if its age expired it (see below)
		}
	}
	// With a maximum age passed too, the lookup says age expires them.
	if err := adm.SetRetention(ctx, "test", tenancy.Retention{TenantID: ten.ID, Idle: time.Hour, MaxAge: 90 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	byAge, err := d.Store().ExpiredContexts(ctx, clock.Now(), store.DefaultRetention{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range byAge {
		if !e.IdleSince.IsZero() {
			t.Errorf("context %d: its age expires it, but the lookup noted a last append", e.ContextID)
		}
	}
	appendTo(idle)
	appendTo(aged)

	deleted, err := d.Store().DeleteExpiredContexts(ctx, ten, expired, "retention")
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[0] != aged {
		t.Errorf("deleted %v, want only the aged context %d", deleted, aged)
	}
	if _, err := d.Store().Context(ten, idle); err != nil {
		t.Errorf("the context appended to since the lookup: %v, want it live", err)
	}
}
