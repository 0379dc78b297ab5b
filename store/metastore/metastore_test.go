package metastore_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/metastore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is a turn store and the metadata storage beside it.
type env struct {
	t     *testing.T
	dir   string
	pool  *pgxpool.Pool
	quota store.QuotaFunc
	e     *store.Engine
	m     *metastore.Store
}

func newEnv(t *testing.T, quota store.QuotaFunc) *env {
	t.Helper()
	v := &env{t: t, dir: t.TempDir(), pool: pgtest.NewPool(t), quota: quota}
	v.open()
	return v
}

func (v *env) open() {
	v.t.Helper()
	e, err := store.Open(context.Background(), store.Options{Dir: v.dir, Pool: v.pool, Quota: v.quota})
	if err != nil {
		v.t.Fatal(err)
	}
	v.t.Cleanup(func() { e.Close() })
	v.e, v.m = e, metastore.New(v.pool, 0, e)
}

func (v *env) tenant(id string) ident.Tenant {
	v.t.Helper()
	return seed.StoreTenant(v.t, v.pool, v.e, id)
}

// A bundle's body is charged to its tenant once, also after a restart;
// bundles come back in publish order.
func TestBundlesAreCharged(t *testing.T) {
	v := newEnv(t, nil)
	ctx := context.Background()
	a, b := v.tenant("acme"), v.tenant("globex")
	body := []byte(`{"registry_version":1,"bundle_id":"b1","types":{}}`)
	before, other := v.e.Usage(a), v.e.Usage(b)
	for i, want := range []bool{true, false} {
		stored, err := v.m.AddRegistryBundle(ctx, a, metastore.Bundle{ID: "b1", Body: body})
		if err != nil || stored != want {
			t.Fatalf("publish %d: stored %v, %v; want %v", i, stored, err, want)
		}
	}
	if _, err := v.m.AddRegistryBundle(ctx, a, metastore.Bundle{ID: "b2", Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	want := before + int64(len(body)) + 2
	if got := v.e.Usage(a); got != want {
		t.Errorf("usage %d, want %d", got, want)
	}
	if got := v.e.Usage(b); got != other {
		t.Errorf("the other tenant's usage moved from %d to %d", other, got)
	}
	if err := v.e.Close(); err != nil {
		t.Fatal(err)
	}
	v.open()
	if got := v.e.Usage(a); got != want {
		t.Errorf("after a restart: usage %d, want %d", got, want)
	}
	got, err := v.m.RegistryBundles(ctx, a)
	if err != nil || len(got) != 2 || got[0].ID != "b1" || got[1].ID != "b2" || !bytes.Equal(got[0].Body, body) {
		t.Errorf("bundles %+v, %v", got, err)
	}
}

// A bundle the quota refuses is not stored.
func TestBundleOverQuota(t *testing.T) {
	refuse := func(_ context.Context, _ ident.Tenant, stored, adding int64) error {
		if adding > 100 {
			return fault.New(fault.QuotaExceeded, "storage quota exceeded")
		}
		return nil
	}
	v := newEnv(t, refuse)
	ctx := context.Background()
	a := v.tenant("acme")
	_, err := v.m.AddRegistryBundle(ctx, a, metastore.Bundle{ID: "big", Body: bytes.Repeat([]byte("x"), 700)})
	if fault.KindOf(err) != fault.QuotaExceeded {
		t.Fatalf("over quota: %v, want QUOTA_EXCEEDED", err)
	}
	if got, err := v.m.RegistryBundles(ctx, a); err != nil || len(got) != 0 {
		t.Errorf("bundles %+v, %v; want none", got, err)
	}
}

// Metadata saved for a chain root is the metadata of its contexts, and is
// not replaced.
func TestRootMetadata(t *testing.T) {
	v := newEnv(t, nil)
	ctx := context.Background()
	a := v.tenant("acme")
	c, root := v.appendFirst(a)
	title, other := "first", "second"
	for _, m := range []*metastore.ContextMeta{{Title: &title, Labels: []string{"x"}}, {Title: &other}} {
		if err := v.m.SaveRootMetadata(ctx, a, root, []uint64{c}, m); err != nil {
			t.Fatal(err)
		}
	}
	got, err := v.m.Metadata(ctx, a, nil)
	if err != nil || len(got) != 1 || got[c].Title == nil || *got[c].Title != title || len(got[c].Labels) != 1 {
		t.Fatalf("metadata %+v, %v", got, err)
	}
	sizes, err := v.m.MetadataSizes(ctx, a, []uint64{c})
	if err != nil || sizes[c] <= 0 {
		t.Errorf("sizes %v, %v", sizes, err)
	}
	if pending, err := v.m.ContextsWithoutMetadata(ctx, 10); err != nil || len(pending) != 0 {
		t.Errorf("pending %+v, %v; want none", pending, err)
	}
}

// appendFirst makes a context with one turn.
func (v *env) appendFirst(t ident.Tenant) (contextID, turnID uint64) {
	v.t.Helper()
	ctx := context.Background()
	h, err := v.e.CreateContext(ctx, t, 0, "")
	if err != nil {
		v.t.Fatal(err)
	}
	p := []byte("hello")
	r, err := v.e.Append(ctx, t, &store.AppendRequest{
		ContextID: h.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3, Encoding: 1,
		UncompressedLen: uint32(len(p)), ContentHash: blake3.Sum256(p), Payload: p,
	})
	if err != nil {
		v.t.Fatal(err)
	}
	return h.ContextID, r.TurnID
}

// A deleted tenant's bundles and metadata are gone for the store that
// forgot it, and its late writes are answered as for a tenant that does
// not exist.
func TestForgottenTenant(t *testing.T) {
	v := newEnv(t, nil)
	ctx := context.Background()
	a := v.tenant("acme")
	c, root := v.appendFirst(a)
	if _, err := v.m.AddRegistryBundle(ctx, a, metastore.Bundle{ID: "b", Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := v.m.SaveRootMetadata(ctx, a, root, []uint64{c}, &metastore.ContextMeta{}); err != nil {
		t.Fatal(err)
	}
	pgtest.MarkTenantDeleted(t, v.pool, a.ID)
	if _, err := v.e.ForgetTenant(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	pgtest.PurgeDeletedTenant(t, v.pool, a.ID)
	if got, err := v.m.RegistryBundles(ctx, a); err != nil || len(got) != 0 {
		t.Errorf("bundles: %d, %v", len(got), err)
	}
	if got, err := v.m.Metadata(ctx, a, nil); err != nil || len(got) != 0 {
		t.Errorf("metadata: %d, %v", len(got), err)
	}
	if got, err := v.m.MetadataSizes(ctx, a, nil); err != nil || len(got) != 0 {
		t.Errorf("metadata sizes: %d, %v", len(got), err)
	}
	_, err := v.m.AddRegistryBundle(ctx, a, metastore.Bundle{ID: "late", Body: []byte("{}")})
	for name, err := range map[string]error{
		"bundle": err,
		"meta":   v.m.SaveRootMetadata(ctx, a, root, []uint64{c}, nil),
	} {
		if fault.KindOf(err) != fault.NotFound {
			t.Errorf("%s after the deletion: %v, want not found", name, err)
		}
	}
}
