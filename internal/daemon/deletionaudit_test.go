package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// Every context deletion leaves an audit record naming who asked: the
// key of a DELETE (as `cardbox context delete` sends it), or retention
// for a context its policies expired.
func TestContextDeletionsAreAudited(t *testing.T) {
	start := time.Now()
	clock := &fakeClock{now: start}
	d := daemontest.New(t, func(c *daemon.Config) {
		c.Mode = daemon.ModeHosted
		c.Test.Now = clock.Now
		c.SweepInterval = 24 * time.Hour // the test sweeps itself
	})
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	adm := tenancy.New(d.Pool(), nil)
	if _, err := adm.CreateTenant(ctx, "test", "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	key, secret, err := adm.CreateKey(ctx, "test", "acme", auth.RoleWriter, nil)
	if err != nil {
		t.Fatal(err)
	}
	acme, err := d.Store().Tenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	byKey, err := d.Store().CreateContext(ctx, acme, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	expired, err := d.Store().CreateContext(ctx, acme, 0, "")
	if err != nil {
		t.Fatal(err)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, fmt.Sprintf("http://%s/v1/contexts/%d", d.HTTPAddr(), byKey.ContextID), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %s, want 204", res.Status)
	}
	if err := adm.SetRetention(ctx, "test", tenancy.Retention{TenantID: "acme", MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	clock.set(start.Add(2 * time.Hour))
	if n, err := d.CXDB().SweepRetention(ctx); err != nil || n != 1 {
		t.Fatalf("the sweep deleted %d contexts (%v), want 1", n, err)
	}

	entries, err := adm.Audit(ctx, "acme", 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{} // target → actor
	for _, e := range entries {
		if e.Action == "context.delete" {
			got[e.Target] = e.Actor
		}
	}
	want := map[string]string{
		fmt.Sprint(byKey.ContextID):   "key:" + key.ID,
		fmt.Sprint(expired.ContextID): "retention",
	}
	if len(got) != len(want) {
		t.Errorf("context.delete records %v, want %v", got, want)
	}
	for target, actor := range want {
		if got[target] != actor {
			t.Errorf("the deletion of context %s is audited as by %q, want %q", target, got[target], actor)
		}
	}
}

// wrappedStore is a turn store as a test wraps it (Test.WrapStore): it
// adds nothing, and has only the methods service.Store names.
type wrappedStore struct{ service.Store }

// A service over a wrapped store deletes contexts, over HTTP and by
// retention: what deletion needs of the store is part of its contract,
// not found by asking the store at run time.
func TestDeletionThroughAWrappedStore(t *testing.T) {
	d, clock, ctx, ten := sweptByHand(t, func(c *daemon.Config) {
		c.Test.WrapStore = func(s service.Store) service.Store { return wrappedStore{s} }
	})
	start := clock.Now()
	deleted, err := d.Store().CreateContext(ctx, ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	expired, err := d.Store().CreateContext(ctx, ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, fmt.Sprintf("http://%s/v1/contexts/%d", d.HTTPAddr(), deleted.ContextID), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %s, want 204", res.Status)
	}
	if err := tenancy.New(d.Pool(), nil).SetRetention(ctx, "test", tenancy.Retention{TenantID: ten.ID, MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	clock.set(start.Add(2 * time.Hour))
	if n, err := d.CXDB().SweepRetention(ctx); err != nil || n != 1 {
		t.Fatalf("the sweep deleted %d contexts (%v), want 1", n, err)
	}
	for _, id := range []uint64{deleted.ContextID, expired.ContextID} {
		if _, err := d.Store().Context(ten, id); fault.KindOf(err) != fault.NotFound {
			t.Errorf("context %d: %v, want it deleted", id, err)
		}
	}
}
