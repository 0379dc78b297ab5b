package server_test

import (
	"strconv"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat"
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
