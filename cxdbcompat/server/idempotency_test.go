package server_test

import (
	"strconv"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
)

// A reused idempotency key with another payload is ERROR 409 whose detail
// names the original turn; an exact repeat returns that turn.
func TestReusedIdempotencyKeyIs409NamingTheOriginal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	req := appendReq(h.ContextID, 0, []byte("first"))
	req.IdempotencyKey = []byte("key-1")
	first, _ := cxdbcompat.DecodeAppendTurnResponse(c.expectOK(cxdbcompat.MsgAppendTurn, 0, req.AppendTo(nil)))
	again, _ := cxdbcompat.DecodeAppendTurnResponse(c.expectOK(cxdbcompat.MsgAppendTurn, 0, req.AppendTo(nil)))
	if again.NewTurnID != first.NewTurnID {
		t.Fatalf("exact repeat made turn %d, want %d", again.NewTurnID, first.NewTurnID)
	}
	other := appendReq(h.ContextID, 0, []byte("second"))
	other.IdempotencyKey = req.IdempotencyKey
	before := e.snapshot()
	er := c.expectError(cxdbcompat.MsgAppendTurn, 0, other.AppendTo(nil), 409)
	if got := er.Details["original_turn_id"]; got != strconv.FormatUint(first.NewTurnID, 10) {
		t.Fatalf("details name turn %v, want %d: %+v", got, first.NewTurnID, er)
	}
	e.requireUnchanged(before, "a conflicting append")
}

// The client tag of HELLO is recorded on every context the session
// creates or forks; a session without HELLO records none.
func TestHelloClientTagIsStoredOnContexts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tagged := e.dial(client.WithClientTag("agent-runtime/1.2"))
	created, err := tagged.CreateContext(testCtx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	plain := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(plain.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	res, _ := cxdbcompat.DecodeAppendTurnResponse(plain.expectOK(cxdbcompat.MsgAppendTurn, 0, appendReq(h.ContextID, 0, []byte("x")).AppendTo(nil)))
	forked, err := tagged.ForkContext(testCtx(t), res.NewTurnID)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[uint64]string{created.ContextID: "agent-runtime/1.2", forked.ContextID: "agent-runtime/1.2", h.ContextID: ""} {
		var got string
		if err := e.pool.QueryRow(testCtx(t), `SELECT client_tag FROM contexts WHERE context_id = $1`, int64(id)).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("context %d: client_tag %q, want %q", id, got, want)
		}
	}
	// A tag Postgres cannot store is refused at HELLO.
	c := dialRaw(t, e.addr)
	c.expectError(cxdbcompat.MsgHello, 0, cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientTag: "a\x00b"}.AppendTo(nil), 400)
}
