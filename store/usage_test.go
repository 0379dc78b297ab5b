package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// Every write is charged to its tenant as if it were alone: a blob another
// tenant stored first in full, a blob the tenant stored before not again;
// turns and contexts a fixed charge, bundles their bodies, fs attachments
// nothing. The other tenant's usage never moves, and both usages are the
// same after a restart (they are derived again from the files and rows).
func TestUsageChargesEachTenantAsIfAlone(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	a, b := s.tenant("acme"), s.tenant("globex")
	ca, cb := s.create(a, 0), s.create(b, 0)
	payload := bytes.Repeat([]byte("payload "), 1000) // compresses well: charged uncompressed
	blob := []byte("a blob both tenants store")
	tree := fstree.Encode([]fstree.Entry{{Name: "blob.txt", Size: uint64(len(blob)), Hash: blake3.Sum256(blob), HashOK: true}})
	var acmeTurn uint64
	appendTo := func(c Head) func(ident.Tenant) error {
		return func(t ident.Tenant) error {
			r, err := s.Append(ctx, t, turnReq(c.ContextID, 0, payload))
			if t == a {
				acmeTurn = r.TurnID
			}
			return err
		}
	}
	put := func(data []byte) func(ident.Tenant) error {
		return func(t ident.Tenant) error {
			_, err := s.PutBlob(ctx, t, blake3.Sum256(data), data)
			return err
		}
	}
	bundle := []byte(`{"registry_version":1,"bundle_id":"b1","types":{}}`)
	for _, step := range []struct {
		name   string
		tenant ident.Tenant
		do     func(ident.Tenant) error
		want   int64 // added to the tenant's usage
	}{
		{"acme appends a new payload", a, appendTo(ca), int64(len(payload)) + TurnCharge},
		{"acme appends the same payload again", a, appendTo(ca), TurnCharge},
		{"globex appends the bytes acme stored", b, appendTo(cb), int64(len(payload)) + TurnCharge},
		{"globex appends them again", b, appendTo(cb), TurnCharge},
		{"acme puts a new blob", a, put(blob), int64(len(blob))},
		{"acme puts it again", a, put(blob), 0},
		{"globex puts the blob acme stored", b, put(blob), int64(len(blob))},
		{"globex puts it again", b, put(blob), 0},
		{"acme puts an fs tree", a, put(tree), int64(len(tree))},
		{"acme attaches it", a, func(t ident.Tenant) error { return s.AttachFS(ctx, t, acmeTurn, blake3.Sum256(tree)) }, 0},
		{"acme creates a context", a, func(t ident.Tenant) error { _, err := s.CreateContext(ctx, t, 0, ""); return err }, ContextCharge},
		{"acme forks", a, func(t ident.Tenant) error { _, err := s.CreateContext(ctx, t, acmeTurn, ""); return err }, ContextCharge},
		{"acme publishes a bundle", a, func(t ident.Tenant) error { s.addBundle(t, "b1", bundle); return nil }, int64(len(bundle))},
		{"acme publishes it again", a, func(t ident.Tenant) error { s.addBundle(t, "b1", bundle); return nil }, 0},
	} {
		other := b
		if step.tenant == b {
			other = a
		}
		before, otherBefore := s.Usage(step.tenant), s.Usage(other)
		if err := step.do(step.tenant); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := s.Usage(step.tenant) - before; got != step.want {
			t.Errorf("%s: usage grew by %d, want %d", step.name, got, step.want)
		}
		if got := s.Usage(other); got != otherBefore {
			t.Errorf("%s: the other tenant's usage moved from %d to %d", step.name, otherBefore, got)
		}
	}
	want := map[ident.Tenant]int64{a: s.Usage(a), b: s.Usage(b)}
	s.reopen()
	for ten, n := range want {
		if got := s.Usage(ten); got != n {
			t.Errorf("%s after a restart: usage %d, want %d", ten.ID, got, n)
		}
	}
}

// Tenants appending the same new bytes at once, whichever groups their
// appends fall in, are each charged the bytes once and every turn.
func TestUsageOfConcurrentDuplicates(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	payload := bytes.Repeat([]byte("same bytes "), 500)
	const perTenant = 20
	tenants := []ident.Tenant{s.tenant("acme"), s.tenant("globex"), s.tenant("initech")}
	var wg sync.WaitGroup
	errs := make(chan error, len(tenants)*perTenant)
	for _, ten := range tenants {
		c := s.create(ten, 0)
		for range perTenant {
			wg.Go(func() {
				_, err := s.Append(ctx, ten, turnReq(c.ContextID, 0, payload))
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	want := int64(len(payload)) + perTenant*TurnCharge + ContextCharge
	check := func(when string) {
		for _, ten := range tenants {
			if got := s.Usage(ten); got != want {
				t.Errorf("%s: %s's usage %d, want %d", when, ten.ID, got, want)
			}
		}
	}
	check("after the appends")
	s.reopen()
	check("after a restart")
}

// quotas is a QuotaFunc with a limit per tenant id (none: unlimited).
type quotas struct {
	mu    sync.Mutex
	limit map[string]int64
}

func (q *quotas) set(tenant string, n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limit[tenant] = n
}

func (q *quotas) check(_ context.Context, t ident.Tenant, stored, adding int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n, ok := q.limit[t.ID]; ok && stored+adding > n {
		return &fault.Error{Kind: fault.QuotaExceeded, Message: "storage quota exceeded", Details: map[string]any{"used_bytes": stored, "quota_bytes": n, "adding_bytes": adding}}
	}
	return nil
}

// snapshot is what a refused write must leave as it was.
type snapshot struct {
	usage                  int64
	head                   Head
	turns, grants, bundles int
	contexts               int
	packBytes, logBytes    int64
}

func (s *testStore) snapshot(t ident.Tenant, contextID uint64) snapshot {
	s.t.Helper()
	h, err := s.Head(context.Background(), t, contextID)
	if err != nil {
		s.t.Fatal(err)
	}
	where := fmt.Sprintf(" WHERE tenant_id = '%s'", t.ID)
	return snapshot{
		usage: s.Usage(t), head: h, turns: s.countRows("turns" + where), grants: s.countRows("tenant_blobs" + where),
		bundles: s.countRows("registry_bundles" + where), contexts: s.countRows("contexts" + where),
		packBytes: s.Stats().PackBytes, logBytes: s.Stats().LogBytes,
	}
}

// A tenant writes until its quota refuses: every kind of write is then
// refused with fault.QuotaExceeded, naming used and limit, and leaves
// nothing behind (no turn, no head move, no blob, no grant, no row, not a
// byte in the files, usage unchanged); another tenant is not affected; a raised quota lets the
// writes through again.
func TestQuotaRefusesWritesAndLeavesNothing(t *testing.T) {
	q := &quotas{limit: map[string]int64{}}
	s := &testStore{t: t, dir: t.TempDir(), pool: pgtest.NewPool(t), quota: q.check}
	s.open(nil)
	ctx := context.Background()
	a, b := s.tenant("acme"), s.tenant("globex")
	ca, cb := s.create(a, 0), s.create(b, 0)
	first := s.append(a, turnReq(ca.ContextID, 0, []byte("first turn")))
	ownTree := fstree.Encode([]fstree.Entry{{Name: "first", Hash: first.ContentHash, HashOK: true}})
	if _, err := s.PutBlob(ctx, a, blake3.Sum256(ownTree), ownTree); err != nil {
		t.Fatal(err)
	}
	othersBytes := bytes.Repeat([]byte("globex's bytes "), 100)
	s.append(b, turnReq(cb.ContextID, 0, othersBytes))
	limit := s.Usage(a) + 3*(TurnCharge+600)
	q.set(a.ID, limit)

	// Appends of 600 new bytes each fit three times.
	var refused error
	n := 0
	for ; n < 10 && refused == nil; n++ {
		_, refused = s.Append(ctx, a, turnReq(ca.ContextID, 0, bytes.Repeat([]byte{byte('a' + n)}, 600)))
	}
	if n != 4 {
		t.Fatalf("the quota refused append %d, want the 4th (err %v)", n, refused)
	}
	wantQuotaError(t, refused, limit, limit)

	tree := fstree.Encode([]fstree.Entry{{Name: "f", Hash: blake3.Sum256(othersBytes), HashOK: true}})
	newBytes := bytes.Repeat([]byte("never stored"), 10)
	before := s.snapshot(a, ca.ContextID)
	for _, w := range []struct {
		name string
		do   func() error
		gone ident.Hash // a blob that must not be in the pack afterwards
	}{
		{"append of new bytes", func() error {
			_, err := s.Append(ctx, a, turnReq(ca.ContextID, 0, newBytes))
			return err
		}, blake3.Sum256(newBytes)},
		{"append of another tenant's bytes", func() error {
			_, err := s.Append(ctx, a, turnReq(ca.ContextID, 0, othersBytes))
			return err
		}, ident.Hash{}},
		{"append of its own bytes (a turn more)", func() error {
			_, err := s.Append(ctx, a, turnReq(ca.ContextID, 0, []byte("first turn")))
			return err
		}, ident.Hash{}},
		{"put of a new blob", func() error {
			_, err := s.PutBlob(ctx, a, blake3.Sum256(tree), tree)
			return err
		}, blake3.Sum256(tree)},
		{"put of another tenant's blob", func() error {
			_, err := s.PutBlob(ctx, a, blake3.Sum256(othersBytes), othersBytes)
			return err
		}, ident.Hash{}},
		{"context", func() error { _, err := s.CreateContext(ctx, a, 0, ""); return err }, ident.Hash{}},
		{"fork", func() error { _, err := s.CreateContext(ctx, a, first.TurnID, ""); return err }, ident.Hash{}},
		{"bundle", func() error { return s.CheckQuota(ctx, a, 700) }, ident.Hash{}},
	} {
		err := w.do()
		if fault.KindOf(err) != fault.QuotaExceeded {
			t.Errorf("%s: %v, want QUOTA_EXCEEDED", w.name, err)
		}
		if after := s.snapshot(a, ca.ContextID); after != before {
			t.Errorf("%s: refused, but %+v became %+v", w.name, before, after)
		}
		if _, ok := s.blobs.Lookup(w.gone); ok && w.gone != (ident.Hash{}) {
			t.Errorf("%s: refused, but its blob is in the pack", w.name)
		}
	}
	// An attachment adds nothing: refused only once the tenant is over.
	if err := s.AttachFS(ctx, a, first.TurnID, blake3.Sum256(ownTree)); err != nil {
		t.Errorf("attach at the quota: %v", err)
	}
	q.set(a.ID, s.Usage(a)-1)
	wantKind(t, s.AttachFS(ctx, a, first.TurnID, blake3.Sum256(ownTree)), fault.QuotaExceeded)

	// globex has no quota: unaffected.
	s.append(b, turnReq(cb.ContextID, 0, newBytes))
	// A raised quota lets acme's writes through again.
	q.set(a.ID, s.Usage(a)+1<<20)
	s.append(a, turnReq(ca.ContextID, 0, newBytes))
	if _, err := s.PutBlob(ctx, a, blake3.Sum256(tree), tree); err != nil {
		t.Fatalf("put after the quota was raised: %v", err)
	}
}

// wantQuotaError checks a quota refusal's kind and details.
func wantQuotaError(t *testing.T, err error, used, quota int64) {
	t.Helper()
	var se *fault.Error
	if !errors.As(err, &se) || se.Kind != fault.QuotaExceeded {
		t.Fatalf("got %v, want a QUOTA_EXCEEDED error", err)
	}
	if se.Details["used_bytes"] != used || se.Details["quota_bytes"] != quota {
		t.Errorf("details %v, want used_bytes %d and quota_bytes %d", se.Details, used, quota)
	}
}
