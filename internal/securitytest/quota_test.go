package securitytest_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/store"
)

// quotaSession is a tenant's binary session for the quota test.
type quotaSession struct {
	t *testing.T
	c *rawConn
}

func (h *hosted) quotaSession(t *testing.T, c cred) quotaSession {
	t.Helper()
	conn := h.dialRaw(t)
	if f := conn.call(t, hello("quota-agent", h.secrets[c])); f.Type != cxdbcompat.MsgHello {
		t.Fatalf("HELLO: %s %s", f.Type, detail(f))
	}
	return quotaSession{t: t, c: conn}
}

// appendMsg is an APPEND_TURN of data.
func appendOf(contextID uint64, data []byte) message {
	return req(cxdbcompat.AppendTurnRequest{
		ContextID: contextID, DeclaredTypeID: "com.example.Note", DeclaredTypeVersion: 1, Encoding: cxdbcompat.EncodingMsgpack,
		UncompressedLen: uint32(len(data)), ContentHash: blake3.Sum256(data), Payload: data, IdempotencyKey: []byte{},
	})
}

func putOf(data []byte) message {
	return req(cxdbcompat.PutBlobRequest{Hash: blake3.Sum256(data), Data: data})
}

// ok sends m and requires its own answer type.
func (s quotaSession) ok(m message) cxdbcompat.Frame {
	s.t.Helper()
	f := s.c.call(s.t, m)
	if f.Type != m.typ {
		s.t.Fatalf("%s: %s %s", m.typ, f.Type, detail(f))
	}
	return f
}

func (s quotaSession) create() uint64 {
	s.t.Helper()
	head, err := cxdbcompat.DecodeHeadResponse(s.ok(req(cxdbcompat.CtxCreateRequest{})).Payload)
	if err != nil {
		s.t.Fatal(err)
	}
	return head.ContextID
}

func (s quotaSession) append(contextID uint64, data []byte) uint64 {
	s.t.Helper()
	r, err := cxdbcompat.DecodeAppendTurnResponse(s.ok(appendOf(contextID, data)).Payload)
	if err != nil {
		s.t.Fatal(err)
	}
	return r.NewTurnID
}

// TestStorageQuota is hosted mode's storage quota over both surfaces (see
// docs/security.md, "Storage quotas"). acme, given a small quota as
// `cardbox tenant quota` sets it, appends until the quota refuses; then
// every kind of write is refused, on the binary protocol with ERROR 507
// QUOTA_EXCEEDED and over HTTP with 507 QUOTA_EXCEEDED, both naming the
// bytes used and the quota (a full disk is DISK_FULL), and leaves
// nothing: no row of any tenant, no byte in the files, the same usage.
// globex storing bytes acme stored is charged them in full; a raised
// quota lets acme write again, and GET /admin/tenants shows both.
func TestStorageQuota(t *testing.T) {
	t.Parallel()
	h := newHosted(t)
	ctx := context.Background()
	acme, globex := h.quotaSession(t, acmeWriter), h.quotaSession(t, globexWriter)
	h.do(t, acmeWriter, request{"PUT", "/v1/registry/bundles/" + registry.ConversationBundleID, string(registry.ConversationBundle)}).want(t, http.StatusCreated)
	h.do(t, acmeWriter, request{"POST", "/projects/acme/cards", `{"card_id":"c1","content":"hello","metadata":{"type":"task.instruction"}}`}).want(t, http.StatusCreated)
	h.do(t, acmeWriter, request{"PUT", "/projects/acme/boxes/b1", `{"card_ids":["c1"]}`}).want(t, http.StatusOK)
	acmeCtx := acme.create()
	first := acme.append(acmeCtx, []byte("acme's first turn"))
	tree := fstree.Encode([]fstree.Entry{{Name: "f.txt", Kind: fstree.KindFile, Mode: 0o644, Size: 17, Hash: blake3.Sum256([]byte("acme's first turn")), HashOK: true}})
	acme.ok(putOf(tree))
	globexBytes := bytes.Repeat([]byte("globex's own bytes "), 50)
	globex.append(globex.create(), globexBytes)

	used := func(tenant string) int64 {
		u, _ := h.usage(ctx, tenant)
		return u
	}
	const size = 1000
	limit := used("acme") + 3*(store.TurnCharge+size)
	if err := h.keys.SetQuota(ctx, "test", "acme", limit); err != nil {
		t.Fatal(err)
	}
	// Three appends of 1000 new bytes fit, the fourth does not.
	for i := range 4 {
		f := acme.c.call(t, appendOf(acmeCtx, bytes.Repeat([]byte{byte('a' + i)}, size)))
		if i < 3 {
			if f.Type != cxdbcompat.MsgAppendTurn {
				t.Fatalf("append %d under the quota: %s %s", i+1, f.Type, detail(f))
			}
			continue
		}
		e := errorOf(t, f, 507, "QUOTA_EXCEEDED")
		if e.Details["used_bytes"] != float64(limit) || e.Details["quota_bytes"] != float64(limit) {
			t.Errorf("the refusal's details: %v, want used_bytes and quota_bytes %d", e.Details, limit)
		}
	}

	newBytes := []byte("bytes nobody stored")
	binary := []struct {
		name string
		msg  message
	}{
		{"APPEND_TURN of new bytes", appendOf(acmeCtx, newBytes)},
		{"APPEND_TURN of globex's bytes", appendOf(acmeCtx, globexBytes)},
		{"APPEND_TURN of acme's own bytes (a turn more)", appendOf(acmeCtx, []byte("acme's first turn"))},
		{"PUT_BLOB of new bytes", putOf(newBytes)},
		{"PUT_BLOB of globex's bytes", putOf(globexBytes)},
		{"CTX_CREATE", req(cxdbcompat.CtxCreateRequest{})},
		{"CTX_FORK", req(cxdbcompat.CtxForkRequest{BaseTurnID: first})},
	}
	for _, w := range binary {
		h.unchanged(t, "", func() {
			errorOf(t, acme.c.call(t, w.msg), 507, "QUOTA_EXCEEDED")
		})
	}
	web := []request{
		{"POST", fmt.Sprintf("/v1/contexts/%d/append", acmeCtx), `{"type_id":"cxdb.ConversationItem","type_version":3,"data":{"item_type":"system"}}`},
		{"POST", "/v1/contexts/create", `{"base_turn_id":"0"}`},
		{"PUT", "/v1/registry/bundles/acme-2", bundleJSON("acme-2", "com.acme.Two", "string")},
		{"POST", "/projects/acme/cards", `{"card_id":"c2","content":"over","metadata":{"type":"task.instruction"}}`},
		{"PUT", "/projects/acme/boxes/b2", `{"card_ids":["c1"]}`},
		{"POST", "/projects/acme/boxes/b1/append", `{"card_ids":["c1"]}`},
	}
	for _, r := range web {
		h.unchanged(t, "", func() {
			h.do(t, acmeWriter, r).wantError(t, http.StatusInsufficientStorage, "QUOTA_EXCEEDED")
		})
	}
	// An attachment adds nothing: refused only once acme is over.
	attach := req(cxdbcompat.AttachFSRequest{TurnID: first, FSRootHash: blake3.Sum256(tree)})
	acme.ok(attach)
	if err := h.keys.SetQuota(ctx, "test", "acme", limit-1); err != nil {
		t.Fatal(err)
	}
	h.unchanged(t, "", func() { errorOf(t, acme.c.call(t, attach), 507, "QUOTA_EXCEEDED") })

	// globex storing acme's bytes is charged them in full.
	before := used("globex")
	globex.ok(putOf(tree))
	if got := used("globex") - before; got != int64(len(tree)) {
		t.Errorf("globex put acme's tree: charged %d bytes, want %d", got, len(tree))
	}

	// A raised quota lets acme write again, on both surfaces.
	if err := h.keys.SetQuota(ctx, "test", "acme", limit+1<<20); err != nil {
		t.Fatal(err)
	}
	acme.append(acmeCtx, newBytes)
	h.do(t, acmeWriter, web[3]).want(t, http.StatusCreated)

	var listed struct {
		Tenants []struct {
			ID         string `json:"tenant_id"`
			UsedBytes  *int64 `json:"used_bytes"`
			QuotaBytes *int64 `json:"quota_bytes"`
		} `json:"tenants"`
	}
	h.do(t, operator, request{"GET", "/admin/tenants", ""}).want(t, http.StatusOK).json(t, &listed)
	for _, tn := range listed.Tenants {
		want := map[string]int64{"acme": limit + 1<<20, "globex": 0}
		if q, ok := want[tn.ID]; ok && (tn.UsedBytes == nil || *tn.UsedBytes != used(tn.ID) || tn.QuotaBytes == nil || *tn.QuotaBytes != q) {
			t.Errorf("GET /admin/tenants lists %s with %v of %v bytes, want %d of %d", tn.ID, tn.UsedBytes, tn.QuotaBytes, used(tn.ID), q)
		}
	}
}
