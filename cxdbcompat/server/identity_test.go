package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
)

// roleKeys authenticates {"api_key": K}: "writer-*" keys write, "reader-*"
// keys only read; all are tenant acme's.
func roleKeys(*env) server.Authenticator {
	return func(_ context.Context, cred server.Credential) (server.Grant, error) {
		key := cred.Secret
		if len(key) < 7 || (key[:7] != "writer-" && key[:7] != "reader-") {
			return server.Grant{}, errors.New("unknown api key")
		}
		return server.Grant{TenantID: "acme", KeyID: key, ReadOnly: key[:7] == "reader-"}, nil
	}
}

func helloWith(key string) []byte {
	return cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientMetaJSON: []byte(`{"api_key":"` + key + `"}`)}.AppendTo(nil)
}

func TestConnectionsThatNeverAuthenticateAreClosed(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{auth: roleKeys, options: func(o *server.Options) { o.HelloTimeout = 300 * time.Millisecond }})
	start := time.Now() // before the dial: the deadline starts at the server's accept
	c := dialRaw(t, e.addr)
	c.expectClosed()
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("closed after %v, before the HELLO deadline", waited)
	}
	// Authenticating in time lifts the deadline: the session then lives
	// past it.
	e.tenant("acme")
	ok := dialRaw(t, e.addr)
	ok.expectOK(cxdbcompat.MsgHello, 0, helloWith("writer-1"))
	time.Sleep(400 * time.Millisecond) // past the HELLO deadline; nothing to wait on but time
	ok.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0))
}

func TestReadOnlySessionsCannotWrite(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{auth: roleKeys})
	e.tenant("acme")
	w := dialRaw(t, e.addr)
	w.expectOK(cxdbcompat.MsgHello, 0, helloWith("writer-1"))
	h, _ := cxdbcompat.DecodeHeadResponse(w.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	res, _ := cxdbcompat.DecodeAppendTurnResponse(w.expectOK(cxdbcompat.MsgAppendTurn, 0, appendReq(h.ContextID, 0, []byte("x")).AppendTo(nil)))

	r := dialRaw(t, e.addr)
	r.expectOK(cxdbcompat.MsgHello, 0, helloWith("reader-1"))
	before := e.snapshot()
	data := []byte("reader's bytes")
	for _, req := range []cxdbcompat.Request{
		cxdbcompat.CtxCreateRequest{},
		cxdbcompat.CtxForkRequest{BaseTurnID: res.NewTurnID},
		appendReq(h.ContextID, 0, data),
		cxdbcompat.PutBlobRequest{Hash: hashOf(data), Data: data},
		cxdbcompat.AttachFSRequest{TurnID: res.NewTurnID, FSRootHash: hashOf(data)},
	} {
		if er := r.expectError(req.MsgType(), req.Flags(), req.AppendTo(nil), 403); er.Kind != "FORBIDDEN" {
			t.Errorf("%s by a reader: kind %q", req.MsgType(), er.Kind)
		}
	}
	e.requireUnchanged(before, "a reader's writes")
	r.expectOK(cxdbcompat.MsgGetHead, 0, u64(h.ContextID))
	r.expectOK(cxdbcompat.MsgGetLast, 0, cxdbcompat.GetLastRequest{ContextID: h.ContextID, Limit: 10, IncludePayload: true}.AppendTo(nil))
}

func TestCloseSessionsClosesOnlyTheMatchingKeys(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{auth: roleKeys})
	e.tenant("acme")
	revoked := dialRaw(t, e.addr)
	revoked.expectOK(cxdbcompat.MsgHello, 0, helloWith("writer-old"))
	kept := dialRaw(t, e.addr)
	kept.expectOK(cxdbcompat.MsgHello, 0, helloWith("writer-new"))
	unauthenticated := dialRaw(t, e.addr)

	if n := e.srv.CloseSessions(func(id server.Identity) bool { return id.KeyID == "writer-old" }); n != 1 {
		t.Fatalf("closed %d sessions, want 1", n)
	}
	revoked.expectClosed()
	kept.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0))
	unauthenticated.expectOK(cxdbcompat.MsgHello, 0, helloWith("writer-3"))
	if ids := e.srv.Identities(); len(ids) != 2 {
		t.Errorf("identities after the close = %+v", ids)
	}
}

func TestClientTagsNeverKeepSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.dial(client.WithClientTag("agent-7;key=cbk_key_0123456789abcdef_secret"))
	h, err := c.CreateContext(testCtx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	var tag string
	if err := e.pool.QueryRow(testCtx(t), `SELECT client_tag FROM contexts WHERE context_id = $1`, int64(h.ContextID)).Scan(&tag); err != nil {
		t.Fatal(err)
	}
	if tag != "agent-7" {
		t.Errorf("stored client_tag %q, want the name without its key", tag)
	}
}

func TestRateLimitedRequestsGetError429(t *testing.T) {
	t.Parallel()
	allowed := 2
	e := newEnvWith(t, envConfig{auth: roleKeys, options: func(o *server.Options) {
		o.Limit = func(_ context.Context, tenant string) (bool, time.Duration) {
			if tenant != "acme" {
				t.Errorf("limit asked for tenant %q", tenant)
			}
			allowed--
			return allowed >= 0, 1500 * time.Millisecond
		}
	}})
	e.tenant("acme")
	c := dialRaw(t, e.addr)
	c.expectOK(cxdbcompat.MsgHello, 0, helloWith("writer-1")) // HELLO is not limited
	c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0))
	c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0))
	before := e.snapshot()
	if er := c.expectError(cxdbcompat.MsgCtxCreate, 0, u64(0), 429); er.Kind != "RATE_LIMITED" {
		t.Fatalf("over the limit: kind %q", er.Kind)
	}
	e.requireUnchanged(before, "a refused request")
}

func TestConnectionSharesInHostedMode(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{auth: roleKeys, options: func(o *server.Options) {
		o.MaxUnauthenticated = 2
		o.MaxSessionsPerTenant = 2
	}})
	e.tenant("acme")
	// Two connections wait without a key; a third is refused at once (the
	// server accepts in the order the connections were made).
	a, b := dialRaw(t, e.addr), dialRaw(t, e.addr)
	third := dialRaw(t, e.addr)
	f := third.mustRead()
	if er := requireError(t, f, 503); er.Kind != "TOO_MANY_CONNECTIONS" || f.ReqID != 0 {
		t.Fatalf("third unauthenticated connection: %+v", er)
	}
	third.expectClosed()
	// Authenticating frees the unauthenticated slots, and counts against
	// the tenant's share of two.
	a.expectOK(cxdbcompat.MsgHello, 0, helloWith("writer-1"))
	b.expectOK(cxdbcompat.MsgHello, 0, helloWith("writer-2"))
	c := dialRaw(t, e.addr)
	if er := c.expectError(cxdbcompat.MsgHello, 0, helloWith("writer-3"), 503); er.Kind != "TOO_MANY_CONNECTIONS" {
		t.Fatalf("acme's third session: kind %q", er.Kind)
	}
	c.expectClosed()
	a.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)) // the admitted ones are served
}

// A session refused for its tenant's rate is not read again until the
// tenant may make a request: a client that ignores its 429s and floods
// frames gets one refusal per wait, not one per frame.
func TestRefusedSessionPausesReading(t *testing.T) {
	t.Parallel()
	const wait = 100 * time.Millisecond
	e := newEnvWith(t, envConfig{auth: roleKeys, options: func(o *server.Options) {
		o.Limit = func(context.Context, string) (bool, time.Duration) { return false, wait }
	}})
	e.tenant("acme")
	c := dialRaw(t, e.addr)
	c.expectOK(cxdbcompat.MsgHello, 0, helloWith("writer-1"))
	var flood []byte
	for i := range 40 {
		flood = cxdbcompat.AppendFrame(flood, cxdbcompat.MsgGetHead, 0, uint64(i+1), u64(1))
	}
	c.write(flood)
	const window = 4 * wait
	start := time.Now()
	_ = c.conn.SetReadDeadline(start.Add(window))
	answered := 0
	for {
		f, err := cxdbcompat.ReadFrame(c.r, nil)
		if err != nil {
			break // the window ended
		}
		requireError(t, f, 429)
		answered++
	}
	// One answer at once, then one per wait at most (a slow machine
	// answers fewer, never more).
	if most := int(window/wait) + 1; answered < 1 || answered > most {
		t.Fatalf("%d refusals within %v, want 1 to %d", answered, window, most)
	}
}
