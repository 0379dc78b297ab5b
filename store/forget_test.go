package store

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// tenantData is what a test tenant wrote: a context with turns, a fork,
// a blob it put, an fs root attached to its last turn.
type tenantData struct {
	t        ident.Tenant
	main     Head
	fork     Head
	turns    []AppendResult
	blob     ident.Hash
	fsRoot   ident.Hash
	payloads map[uint64][]byte
}

// fill writes a tenant's data; shared is a blob both test tenants store
// (deduplicated: one record, owned by whoever stored it first).
func (s *testStore) fill(id string, shared []byte) *tenantData {
	s.t.Helper()
	ctx := context.Background()
	d := &tenantData{t: s.tenant(id), payloads: map[uint64][]byte{}}
	d.main = s.create(d.t, 0)
	for i := range 5 {
		p := []byte(fmt.Sprintf("%s turn %d", id, i))
		r := s.append(d.t, turnReq(d.main.ContextID, 0, p))
		d.turns, d.payloads[r.TurnID] = append(d.turns, r), p
	}
	d.fork = s.create(d.t, d.turns[2].TurnID)
	d.blob = blake3.Sum256(shared)
	if _, err := s.PutBlob(ctx, d.t, d.blob, shared); err != nil {
		s.t.Fatal(err)
	}
	tree := fstree.Encode([]fstree.Entry{{Name: "shared", Size: uint64(len(shared)), Hash: d.blob, HashOK: true}})
	d.fsRoot = blake3.Sum256(tree)
	if _, err := s.PutBlob(ctx, d.t, d.fsRoot, tree); err != nil {
		s.t.Fatal(err)
	}
	if err := s.AttachFS(ctx, d.t, d.turns[4].TurnID, d.fsRoot); err != nil {
		s.t.Fatal(err)
	}
	s.addBundle(d.t, "b-"+id, []byte("{}"))
	return d
}

// addBundle stores a registry bundle as store/metastore does, so that
// the tenant has a row of each table the store counts or purges.
func (s *testStore) addBundle(t ident.Tenant, id string, body []byte) {
	s.t.Helper()
	ctx := context.Background()
	n, err := s.as(pgrole.Tenant, t.ID).InsertRegistryBundle(ctx, db.InsertRegistryBundleParams{TenantID: t.ID, BundleID: id, Body: body})
	if err != nil {
		s.t.Fatal(err)
	}
	if n == 1 {
		s.Charge(t, int64(len(body)))
	}
}

// deleteInDB deletes tenant id in Postgres as tenancy.Admin.DeleteTenant
// does (the same queries, without the audit record).
func (s *testStore) deleteInDB(id string) {
	s.t.Helper()
	ctx := context.Background()
	q := db.New(s.pool)
	if err := q.MarkTenantDeleted(ctx, id); err != nil {
		s.t.Fatal(err)
	}
	if _, err := q.PurgeDeletedTenants(ctx, pgtype.Text{String: id, Valid: true}); err != nil {
		s.t.Fatal(err)
	}
}

// checkIntact reads everything d wrote, as d's tenant.
func (s *testStore) checkIntact(d *tenantData) {
	s.t.Helper()
	ctx := context.Background()
	got := s.last(d.t, d.main.ContextID, 100, true)
	if len(got) != len(d.turns) {
		s.t.Fatalf("%s: %d turns, want %d", d.t.ID, len(got), len(d.turns))
	}
	for _, turn := range got {
		if !bytes.Equal(turn.Payload, d.payloads[turn.ID]) {
			s.t.Fatalf("%s: turn %d reads %q", d.t.ID, turn.ID, turn.Payload)
		}
	}
	if h, err := s.Head(ctx, d.t, d.fork.ContextID); err != nil || h != d.fork {
		s.t.Fatalf("%s: fork head %+v, %v", d.t.ID, h, err)
	}
	for _, h := range []ident.Hash{d.blob, d.fsRoot} {
		if _, err := s.GetBlob(ctx, d.t, h); err != nil {
			s.t.Fatalf("%s: blob %x: %v", d.t.ID, h, err)
		}
	}
	if root, _, ok, err := s.FSRoot(ctx, d.t, d.turns[4].TurnID); err != nil || !ok || root != d.fsRoot {
		s.t.Fatalf("%s: fs root %x %v %v", d.t.ID, root, ok, err)
	}
}

// never is an id no tenant has: a deleted tenant's ids must answer
// exactly as it does.
const never = 1 << 40

// readErrors are the answers of every read of the store API for the
// given ids, with the ids written as ID, so that the answers for a
// deleted tenant's ids and for ids that never existed compare equal.
func (s *testStore) readErrors(t ident.Tenant, contextID, turnID uint64, blob ident.Hash) map[string]string {
	ctx := context.Background()
	norm := func(err error) string {
		if err == nil {
			return "ok"
		}
		msg := strings.ReplaceAll(err.Error(), fmt.Sprintf("%x", blob), "HASH")
		msg = strings.ReplaceAll(msg, fmt.Sprint(contextID), "ID")
		return fmt.Sprintf("%v: %s", fault.KindOf(err), strings.ReplaceAll(msg, fmt.Sprint(turnID), "ID"))
	}
	_, headErr := s.Head(ctx, t, contextID)
	_, lastErr := s.Last(ctx, t, contextID, 10, true)
	_, beforeErr := s.Before(ctx, t, contextID, turnID, 10, true)
	_, ctxErr := s.Context(t, contextID)
	_, payloadErr := s.TurnPayload(ctx, t, turnID)
	_, blobErr := s.GetBlob(ctx, t, blob)
	_, turnFound := s.TurnInfo(t, turnID)
	_, _, rootFound, rootErr := s.FSRoot(ctx, t, turnID)
	return map[string]string{
		"head": norm(headErr), "last": norm(lastErr), "before": norm(beforeErr), "context": norm(ctxErr),
		"payload": norm(payloadErr), "blob": norm(blobErr), "fs root": norm(rootErr),
		"turn info": fmt.Sprint(turnFound), "root found": fmt.Sprint(rootFound),
		"on chain": fmt.Sprint(s.OnChain(t, contextID, turnID)), "root": fmt.Sprint(s.Root(t, turnID)),
	}
}

func TestForgetTenantAnswersAsIfItNeverExisted(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	a := s.fill("acme", []byte("shared bytes"))
	b := s.fill("bravo", []byte("shared bytes")) // bravo holds a grant to acme's blob
	before := s.Stats()
	s.deleteInDB("acme")
	if _, err := s.ForgetTenant(ctx, "bravo"); fault.KindOf(err) != fault.Invalid {
		t.Fatalf("forgetting a live tenant: %v, want refused", err)
	}
	for range 2 { // twice: the second does nothing
		if got, err := s.ForgetTenant(ctx, "acme"); err != nil || got != a.t {
			t.Fatalf("ForgetTenant = %+v, %v", got, err)
		}
	}

	if !s.Forgotten(a.t) || s.Forgotten(b.t) {
		t.Fatal("Forgotten: want acme only")
	}
	checkForgotten(t, s, a)
	s.checkIntact(b)
	after := s.Stats()
	if after.Contexts != before.Contexts-2 || after.Turns != before.Turns-int64(len(a.turns)) {
		t.Errorf("stats after forgetting acme: %d contexts, %d turns; before %d, %d",
			after.Contexts, after.Turns, before.Contexts, before.Turns)
	}

	// A restart does not bring acme back, and hands out new ids.
	s.reopen()
	if _, err := s.Tenant(ctx, "acme"); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("resolving acme after the restart: %v", err)
	}
	checkForgotten(t, s, a)
	s.checkIntact(b)
	if got := s.Stats(); got.Contexts != after.Contexts || got.Turns != after.Turns {
		t.Errorf("stats after the restart: %d contexts, %d turns; want %d, %d", got.Contexts, got.Turns, after.Contexts, after.Turns)
	}
	r := s.append(b.t, turnReq(b.main.ContextID, 0, []byte("after")))
	if r.TurnID <= a.turns[len(a.turns)-1].TurnID {
		t.Errorf("turn id %d handed out again (acme's last was %d)", r.TurnID, a.turns[len(a.turns)-1].TurnID)
	}
}

// checkForgotten checks that a's every id answers like one that never
// existed, for a itself (a principal resolved before the deletion) and
// for everyone else, and that a can write nothing.
func checkForgotten(t *testing.T, s *testStore, a *tenantData) {
	t.Helper()
	ctx := context.Background()
	other := s.tenant("charlie")
	for _, who := range []ident.Tenant{a.t, other} {
		for _, ids := range []struct {
			name          string
			context, turn uint64
			blob          ident.Hash
		}{{"main", a.main.ContextID, a.turns[4].TurnID, a.fsRoot}, {"fork", a.fork.ContextID, a.turns[2].TurnID, a.blob}} {
			got := s.readErrors(who, ids.context, ids.turn, ids.blob)
			want := s.readErrors(who, never, never+1, ident.Hash{0xEE})
			for op, w := range want {
				if got[op] != w {
					t.Errorf("as %s, %s %s: %s; for ids that never existed: %s", who.ID, ids.name, op, got[op], w)
				}
			}
		}
	}
	if got := s.Contexts(a.t); len(got) != 0 {
		t.Errorf("acme still lists %d contexts", len(got))
	}
	writes := map[string]error{
		"create": second(s.CreateContext(ctx, a.t, 0, "")),
		"append": second(s.Append(ctx, a.t, turnReq(a.main.ContextID, 0, []byte("late")))),
		"put":    second(s.PutBlob(ctx, a.t, blake3.Sum256([]byte("late")), []byte("late"))),
		"attach": s.AttachFS(ctx, a.t, a.turns[4].TurnID, a.fsRoot),
		"admit":  s.Admit(a.t),
	}
	for name, err := range writes {
		if fault.KindOf(err) != fault.NotFound {
			t.Errorf("acme's %s after its deletion: %v, want not found", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// Writes in flight when the tenant is forgotten finish first; none
// lands after ForgetTenant returns, so one purge then leaves no row.
func TestForgetTenantWaitsForWritesInFlight(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	a := s.tenant("acme")
	h := s.create(a, 0)
	s.append(a, turnReq(h.ContextID, 0, []byte("first")))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := s.Append(ctx, a, turnReq(h.ContextID, 0, []byte(fmt.Sprintf("w%d-%d", w, i))))
				if err != nil && fault.KindOf(err) != fault.NotFound {
					t.Errorf("append: %v", err)
					return
				}
			}
		})
	}
	s.deleteInDB("acme") // while the writers run: some of their turns land after it
	if _, err := s.ForgetTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.New(s.pool).PurgeDeletedTenants(ctx, pgtype.Text{String: "acme", Valid: true}); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	for _, table := range []string{"turns", "contexts", "idempotency_keys", "turn_types"} {
		if n := s.countRows(table + " WHERE tenant_id = 'acme'"); n != 0 {
			t.Errorf("%d rows of acme in %s after the purge", n, table)
		}
	}
}
