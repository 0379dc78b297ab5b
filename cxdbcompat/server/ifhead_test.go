package server_test

import (
	"strconv"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// HELLO answers the capability bits only to a client whose metadata asks
// for them: the official clients' HELLO gets the reference's 10 bytes.
func TestHelloAnnouncesCapabilitiesWhenAsked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := dialRaw(t, e.addr)
	tests := []struct {
		name string
		meta string
		size int
		caps uint64
	}{
		{"no metadata", "", 10, 0},
		{"other metadata", `{"tool":"x"}`, 10, 0},
		{"asked", `{"capabilities":true}`, 18, cxdbcompat.CapConditionalAppend | cxdbcompat.CapAppendParent},
		{"declined", `{"capabilities":false}`, 10, 0},
		{"not JSON", `{capabilities`, 10, 0},
	}
	for _, tc := range tests {
		hello := cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientTag: "t", ClientMetaJSON: []byte(tc.meta)}
		p := c.expectOK(cxdbcompat.MsgHello, 0, hello.AppendTo(nil))
		r, err := cxdbcompat.DecodeHelloResponse(p)
		if err != nil || len(p) != tc.size || r.Capabilities != tc.caps || r.ProtocolVersion != 1 {
			t.Errorf("%s: %d bytes %+v %v; want %d bytes, capabilities %b", tc.name, len(p), r, err, tc.size, tc.caps)
		}
	}
}

// APPEND_TURN with FlagIfHead commits only on the head it names; an
// idempotent repeat is answered before the head is checked.
func TestConditionalAppendOverBinary(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	req := appendReq(h.ContextID, 0, []byte("first"))
	req.IdempotencyKey, req.IfHead = []byte("k1"), true
	if req.Flags() != cxdbcompat.FlagIfHead {
		t.Fatalf("flags %b", req.Flags())
	}
	first, _ := cxdbcompat.DecodeAppendTurnResponse(c.expectOK(cxdbcompat.MsgAppendTurn, req.Flags(), req.AppendTo(nil)))
	again, _ := cxdbcompat.DecodeAppendTurnResponse(c.expectOK(cxdbcompat.MsgAppendTurn, req.Flags(), req.AppendTo(nil)))
	if again.NewTurnID != first.NewTurnID {
		t.Fatalf("retry made turn %d, want %d", again.NewTurnID, first.NewTurnID)
	}
	if first.HasParent {
		t.Fatal("a session that asked for no capabilities got the parent in the APPEND_TURN answer")
	}
	late := appendReq(h.ContextID, 0, []byte("late"))
	late.IfHead = true
	before := e.snapshot()
	er := c.expectError(cxdbcompat.MsgAppendTurn, late.Flags(), late.AppendTo(nil), 409)
	if er.Kind != "HEAD_MOVED" || er.Details["head_turn_id"] != strconv.FormatUint(first.NewTurnID, 10) {
		t.Fatalf("error %+v, want HEAD_MOVED naming turn %d", er, first.NewTurnID)
	}
	e.requireUnchanged(before, "a conditional append on a moved head")
	// Without the flag the same request appends after the head.
	c.expectOK(cxdbcompat.MsgAppendTurn, 0, late.AppendTo(nil))
}

// A session that asked for capabilities gets each APPEND_TURN answer with
// the new turn's parent after the 52 bytes, replays included.
func TestAppendAnswerCarriesTheParentWhenAsked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := dialRaw(t, e.addr)
	hello := cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientMetaJSON: []byte(`{"capabilities":true}`)}
	c.expectOK(cxdbcompat.MsgHello, 0, hello.AppendTo(nil))
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	var parent uint64
	for i, payload := range []string{"a", "b", "b"} {
		req := appendReq(h.ContextID, 0, []byte(payload))
		req.IdempotencyKey = []byte(payload)
		p := c.expectOK(cxdbcompat.MsgAppendTurn, 0, req.AppendTo(nil))
		r, err := cxdbcompat.DecodeAppendTurnResponse(p)
		if err != nil || len(p) != 60 || !r.HasParent {
			t.Fatalf("append %d: %d bytes %+v %v, want 60 with the parent", i, len(p), r, err)
		}
		if r.ParentTurnID != parent {
			t.Fatalf("append %d: parent %d, want %d", i, r.ParentTurnID, parent)
		}
		if i == 0 {
			parent = r.NewTurnID
		}
	}
}
