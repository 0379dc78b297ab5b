package server_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// TestSessionsWithoutAuthUseTheDefaultTenant: with no Authenticate, a
// session with or without HELLO writes as the default tenant.
func TestSessionsWithoutAuthUseTheDefaultTenant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	def, err := e.engine.Tenant(ctx, ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}

	withHello := e.dial(client.WithClientMeta([]byte(`{"api_key":"ignored"}`)))
	h1, err := withHello.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := withHello.AppendTurn(ctx, &client.AppendRequest{ContextID: h1.ContextID, TypeID: "t", Payload: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}

	raw := dialRaw(t, e.addr) // never says HELLO
	h2, _ := cxdbcompat.DecodeHeadResponse(raw.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(r1.NewTurnID)))

	for _, id := range []uint64{h1.ContextID, h2.ContextID} {
		if n := e.count(`SELECT count(*) FROM contexts WHERE context_id = $1 AND tenant_id = $2`, int64(id), ident.DefaultTenantID); n != 1 {
			t.Fatalf("context %d is not the default tenant's", id)
		}
		if _, err := e.engine.Head(ctx, def, id); err != nil {
			t.Fatalf("default tenant cannot see context %d: %v", id, err)
		}
	}
	// Both sessions see each other's work.
	if turns, err := withHello.GetLast(ctx, h2.ContextID, 5, false); err != nil || len(turns) != 1 || turns[0].TurnID != r1.NewTurnID {
		t.Fatalf("forked context from the HELLO-less session: %v %v", turns, err)
	}
}

// apiKeys maps API keys (client_meta_json {"api_key": …}) to tenants.
func apiKeys(keys map[string]string) func(*env) server.Authenticator {
	return func(*env) server.Authenticator {
		return func(_ context.Context, cred server.Credential) (server.Grant, error) {
			if cred.Secret == "db-down" { // the key lookup cannot answer
				return server.Grant{}, &fault.Error{Kind: fault.Unavailable, Message: "look up key: database unavailable"}
			}
			tenant, ok := keys[cred.Secret]
			if !ok {
				return server.Grant{}, errors.New("unknown api key")
			}
			return server.Grant{TenantID: tenant, KeyID: cred.Secret}, nil
		}
	}
}

// TestTenantsAreIsolatedPerSession: two sessions authenticated as different
// tenants cannot reach each other's contexts, turns or blobs: every such
// request is a 404, exactly as for ids that do not exist.
func TestTenantsAreIsolatedPerSession(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{auth: apiKeys(map[string]string{"key-a": "acme", "key-b": "bravo"})})
	e.tenant("acme")
	e.tenant("bravo")
	ctx := testCtx(t)
	a := e.dial(client.WithClientMeta([]byte(`{"api_key":"key-a"}`)))
	b := e.dial(client.WithClientMeta([]byte(`{"api_key":"key-b"}`)))

	ha, err := a.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("\xa6secret")
	ra, err := a.AppendTurn(ctx, &client.AppendRequest{ContextID: ha.ContextID, TypeID: "t", Payload: secret})
	if err != nil {
		t.Fatal(err)
	}
	fileA, _, err := a.PutBlob(ctx, []byte("acme file"))
	if err != nil {
		t.Fatal(err)
	}
	blobA, _, err := a.PutBlob(ctx, fstree.Encode([]fstree.Entry{{Name: "acme.txt", Hash: fileA, HashOK: true}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AttachFS(ctx, ra.NewTurnID, blobA); err != nil {
		t.Fatal(err)
	}
	hb, err := b.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.AppendTurn(ctx, &client.AppendRequest{ContextID: hb.ContextID, TypeID: "t", Payload: []byte("bravo")})
	if err != nil {
		t.Fatal(err)
	}
	for id, tenant := range map[uint64]string{ha.ContextID: "acme", hb.ContextID: "bravo"} {
		if n := e.count(`SELECT count(*) FROM contexts WHERE context_id = $1 AND tenant_id = $2`, int64(id), tenant); n != 1 {
			t.Fatalf("context %d does not belong to %s", id, tenant)
		}
	}

	before := e.snapshot()
	cross := []struct {
		name string
		call func() error
	}{
		{"get head", func() error { _, err := b.GetHead(ctx, ha.ContextID); return err }},
		{"get last", func() error { _, err := b.GetLast(ctx, ha.ContextID, 10, true); return err }},
		{"get before", func() error { _, err := b.GetBefore(ctx, ha.ContextID, ra.NewTurnID, 10, true); return err }},
		{"get before with the other's turn as cursor", func() error { _, err := b.GetBefore(ctx, hb.ContextID, ra.NewTurnID, 10, true); return err }},
		{"append to the other's context", func() error {
			_, err := b.AppendTurn(ctx, &client.AppendRequest{ContextID: ha.ContextID, TypeID: "t", Payload: []byte("intrude")})
			return err
		}},
		{"append after the other's turn", func() error {
			_, err := b.AppendTurn(ctx, &client.AppendRequest{ContextID: hb.ContextID, ParentTurnID: ra.NewTurnID, TypeID: "t", Payload: []byte("intrude")})
			return err
		}},
		{"append with the other's fs root", func() error {
			_, err := b.AppendTurn(ctx, &client.AppendRequest{ContextID: hb.ContextID, TypeID: "t", Payload: []byte("intrude"), FSRootHash: &blobA})
			return err
		}},
		{"fork from the other's turn", func() error { _, err := b.ForkContext(ctx, ra.NewTurnID); return err }},
		{"create from the other's turn", func() error { _, err := b.CreateContext(ctx, ra.NewTurnID); return err }},
		{"get the other's blob", func() error { _, err := b.GetBlob(ctx, blobA); return err }},
		{"get the other's payload blob", func() error { _, err := b.GetBlob(ctx, ra.ContentHash); return err }},
		{"attach fs to the other's turn", func() error { _, err := b.AttachFS(ctx, ra.NewTurnID, hashOf([]byte("bravo"))); return err }},
		{"attach the other's fs root", func() error { _, err := b.AttachFS(ctx, rb.NewTurnID, blobA); return err }},
		{"a reads b's context", func() error { _, err := a.GetLast(ctx, hb.ContextID, 10, false); return err }},
	}
	for _, tt := range cross {
		t.Run(tt.name, func(t *testing.T) {
			var se *client.ServerError
			if err := tt.call(); !errors.As(err, &se) || se.Code != 404 || se.Kind != "NOT_FOUND" {
				t.Fatalf("got %v, want 404 NOT_FOUND", err)
			}
		})
	}
	e.requireUnchanged(before, "cross-tenant requests")

	// Storing the same bytes gives b its own copy; a's blob stays a's.
	if _, isNew, err := b.PutBlob(ctx, secret); err != nil || !isNew {
		t.Fatalf("b storing bytes a has: new=%v %v", isNew, err)
	}
	if data, err := b.GetBlob(ctx, ra.ContentHash); err != nil || string(data) != string(secret) {
		t.Fatalf("b's own copy: %q %v", data, err)
	}
	if _, err := b.GetBlob(ctx, blobA); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a's tree after b's put: %v", err)
	}
	// a still sees its own things.
	if turns, err := a.GetLast(ctx, ha.ContextID, 10, true); err != nil || len(turns) != 1 || string(turns[0].Payload) != string(secret) {
		t.Fatalf("a's own context: %v %v", turns, err)
	}
}

// TestAuthenticationIsRequired: with Authenticate set, a request before
// HELLO, or a HELLO that does not authenticate, is answered ERROR 401 and
// the connection is closed, with nothing stored.
func TestAuthenticationIsRequired(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{auth: apiKeys(map[string]string{"key-a": "acme", "key-gone": "no-such-tenant"})})
	e.tenant("acme")

	before := e.snapshot()
	for _, req := range []cxdbcompat.Request{
		cxdbcompat.CtxCreateRequest{},
		cxdbcompat.GetHeadRequest{ContextID: 1},
		appendReq(1, 0, []byte("x")),
		cxdbcompat.PutBlobRequest{Hash: hashOf([]byte("x")), Data: []byte("x")},
		cxdbcompat.GetBlobRequest{Hash: hashOf([]byte("x"))},
	} {
		c := dialRaw(t, e.addr)
		if er := c.expectError(req.MsgType(), req.Flags(), req.AppendTo(nil), 401); er.Kind != "UNAUTHORIZED" {
			t.Fatalf("%s before HELLO: kind %q", req.MsgType(), er.Kind)
		}
		c.expectClosed()
	}
	for _, hello := range []cxdbcompat.HelloRequest{
		{Legacy: true},
		{ProtocolVersion: 1, ClientTag: "no key"},
		{ProtocolVersion: 1, ClientMetaJSON: []byte(`{"api_key":"wrong"}`)},
		{ProtocolVersion: 1, ClientMetaJSON: []byte(`{"api_key":"key-gone"}`)}, // its tenant does not exist
		{ProtocolVersion: 1, ClientMetaJSON: []byte(`not json`)},
	} {
		c := dialRaw(t, e.addr)
		if er := c.expectError(cxdbcompat.MsgHello, 0, hello.AppendTo(nil), 401); er.Kind != "UNAUTHORIZED" {
			t.Fatalf("HELLO %+v: kind %q", hello, er.Kind)
		}
		c.expectClosed()
	}
	// An authenticator that cannot reach its database says so: 503, not a
	// refusal of the credentials, and the session may try again.
	c := dialRaw(t, e.addr)
	if er := c.expectError(cxdbcompat.MsgHello, 0, cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientMetaJSON: []byte(`{"api_key":"db-down"}`)}.AppendTo(nil), 503); er.Kind != "UNAVAILABLE" {
		t.Fatalf("HELLO while the tenant lookup is down: kind %q", er.Kind)
	}
	e.requireUnchanged(before, "unauthenticated requests")

	// The same connection then authenticates and is served.
	c.expectOK(cxdbcompat.MsgHello, 0, cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientMetaJSON: []byte(`{"api_key":"key-a"}`)}.AppendTo(nil))
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	if n := e.count(`SELECT count(*) FROM contexts WHERE context_id = $1 AND tenant_id = 'acme'`, int64(h.ContextID)); n != 1 {
		t.Fatal("context of the authenticated session is not acme's")
	}
	// A later HELLO with other credentials does not switch tenants.
	c.expectOK(cxdbcompat.MsgHello, 0, cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientMetaJSON: []byte(`{"api_key":"wrong"}`)}.AppendTo(nil))
	c.expectOK(cxdbcompat.MsgGetHead, 0, u64(h.ContextID))

	// The official client reports a refused HELLO as Dial's error.
	_, err := client.Dial(testCtx(t), e.addr, client.WithClientMeta([]byte(`{"api_key":"wrong"}`)))
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != 401 {
		t.Fatalf("Dial with a wrong key: %v, want a 401 ServerError", err)
	}
}
