package server_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// TestFixtureReplay sends every upstream fixture frame, byte for byte, over
// one raw connection in an order that makes each meaningful, and checks
// each answer (and that the connection survives every ERROR).
func TestFixtureReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fx := loadFixtures(t)
	c := dialRaw(t, e.addr)
	used := map[string]bool{}

	// send replays a fixture; payload may be patched first.
	send := func(name string, patch func([]byte)) cxdbcompat.Frame {
		t.Helper()
		f, ok := fx[name]
		if !ok {
			t.Fatalf("fixture %s missing", name)
		}
		used[name] = true
		p := bytes.Clone(f.Payload)
		if patch != nil {
			patch(p)
		}
		return c.call(f.MsgType, f.Flags, p)
	}
	ok := func(name string, f cxdbcompat.Frame) []byte {
		t.Helper()
		if want := fx[name].MsgType; f.Type != want {
			t.Fatalf("%s: got %s %s, want %s", name, f.Type, describe(f), want)
		}
		return f.Payload
	}
	var ctxID uint64
	// stillOpen proves the connection survived an ERROR frame.
	stillOpen := func() {
		t.Helper()
		h, err := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgGetHead, 0, u64(ctxID)))
		if err != nil || h.ContextID != ctxID {
			t.Fatalf("GET_HEAD after an error: %+v %v", h, err)
		}
	}
	// onCtx points an append / get_last fixture (context 1) at our context.
	onCtx := func(p []byte) { binary.LittleEndian.PutUint64(p, ctxID) }

	for _, name := range []string{"hello_empty", "hello_tag"} {
		p := ok(name, send(name, nil))
		if len(p) != 10 {
			t.Fatalf("%s: response is %d bytes, want 10", name, len(p))
		}
		h, _ := cxdbcompat.DecodeHelloResponse(p)
		if h.SessionID == 0 || h.ProtocolVersion != 1 {
			t.Fatalf("%s: response %+v", name, h)
		}
	}

	head, err := cxdbcompat.DecodeHeadResponse(ok("ctx_create_base0", send("ctx_create_base0", nil)))
	if err != nil || head.ContextID == 0 || head.HeadTurnID != 0 || head.HeadDepth != 0 {
		t.Fatalf("ctx_create_base0: %+v %v", head, err)
	}
	ctxID = head.ContextID
	if ctxID != 1 {
		t.Logf("fresh database gave context %d; fixtures are re-pointed at it", ctxID)
	}

	// The first turn of an empty context has depth 1 (decisions.md).
	first, err := cxdbcompat.DecodeAppendTurnResponse(ok("append_parent0", send("append_parent0", onCtx)))
	if err != nil {
		t.Fatal(err)
	}
	wantHash := hashOf([]byte{0x91, 0x01})
	if first.ContextID != ctxID || first.NewTurnID == 0 || first.NewDepth != 1 || first.ContentHash != wantHash {
		t.Fatalf("append_parent0: %+v, want depth 1 hash %s", first, wantHash)
	}

	var idem cxdbcompat.AppendTurnResponse
	for i := range 2 {
		r, err := cxdbcompat.DecodeAppendTurnResponse(ok("append_idempotent", send("append_idempotent", onCtx)))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			idem = r
			if r.NewDepth != 2 || r.NewTurnID == first.NewTurnID {
				t.Fatalf("append_idempotent: %+v", r)
			}
		} else if r != idem {
			t.Fatalf("append_idempotent replay = %+v, first = %+v", r, idem)
		}
	}
	// The key holds across connections too.
	other := dialRaw(t, e.addr)
	p := bytes.Clone(fx["append_idempotent"].Payload)
	onCtx(p)
	if r, _ := cxdbcompat.DecodeAppendTurnResponse(other.expectOK(cxdbcompat.MsgAppendTurn, 0, p)); r != idem {
		t.Fatalf("append_idempotent on another connection = %+v, want %+v", r, idem)
	}
	if n := e.count(`SELECT count(*) FROM turns`); n != 2 {
		t.Fatalf("turn rows = %d, want 2", n)
	}

	// Parent 7 does not exist yet.
	before := e.snapshot()
	requireError(t, send("append_parent7", onCtx), 404)
	e.requireUnchanged(before, "append_parent7")
	stillOpen()

	for _, name := range []string{"append_with_fs", "attach_fs"} {
		before := e.snapshot()
		requireError(t, send(name, onCtx), 404) // the fs root blob was never uploaded
		e.requireUnchanged(before, name)
		stillOpen()
	}
	// attach_fs names turn 99; on an existing turn the missing root is
	// still 404.
	before = e.snapshot()
	requireError(t, send("attach_fs", func(p []byte) { binary.LittleEndian.PutUint64(p, first.NewTurnID) }), 404)
	e.requireUnchanged(before, "attach_fs on turn 1")

	requireError(t, send("get_head_ctx42", nil), 404)
	stillOpen()
	requireError(t, send("ctx_fork_base123", nil), 404)
	stillOpen()

	// Grow the chain until turn 7 exists; append_parent7 then branches
	// from it.
	payloads := map[uint64][]byte{first.NewTurnID: {0x91, 0x01}, idem.NewTurnID: {0x91, 0x03}}
	last := idem
	for last.NewTurnID < 7 {
		pl := []byte{0x91, byte(0x10 + last.NewTurnID)}
		last, err = cxdbcompat.DecodeAppendTurnResponse(c.expectOK(cxdbcompat.MsgAppendTurn, 0, appendReq(ctxID, 0, pl).AppendTo(nil)))
		if err != nil {
			t.Fatal(err)
		}
		payloads[last.NewTurnID] = pl
	}
	if last.NewTurnID != 7 {
		t.Fatalf("turn ids skipped 7 (last %d)", last.NewTurnID)
	}
	r7, err := cxdbcompat.DecodeAppendTurnResponse(ok("append_parent7", send("append_parent7", onCtx)))
	if err != nil || r7.NewDepth != last.NewDepth+1 || r7.ContentHash != hashOf([]byte{0x91, 0x02}) {
		t.Fatalf("append_parent7 with turn 7 present: %+v %v (turn 7 depth %d)", r7, err, last.NewDepth)
	}
	payloads[r7.NewTurnID] = []byte{0x91, 0x02}

	// include_payload = 0: every item still carries payload_len, 0.
	raw := ok("get_last_default", send("get_last_default", onCtx))
	items, err := cxdbcompat.DecodeTurnList(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 8 { // turns 1..7 and r7, limit 10
		t.Fatalf("get_last_default: %d items, want 8", len(items))
	}
	// Exactly the items, and the one padding byte that follows a last
	// record with an empty payload (see turnListFrame).
	if !bytes.Equal(append(cxdbcompat.AppendTurnList(nil, items), 0), raw) {
		t.Fatal("get_last_default response is not its items and one padding byte")
	}
	for i, it := range items {
		if len(it.Payload) != 0 || it.Depth != uint32(i+1) || it.DeclaredTypeID != "cxdb.ConversationItem" || it.DeclaredTypeVersion != 3 {
			t.Fatalf("get_last_default item %d: %+v", i, it)
		}
		if int(it.UncompressedLen) != len(payloads[it.TurnID]) || it.ContentHash != hashOf(payloads[it.TurnID]) {
			t.Fatalf("get_last_default item %d metadata: %+v", i, it)
		}
	}
	if items[len(items)-1].TurnID != r7.NewTurnID || items[len(items)-2].TurnID != 7 {
		t.Fatalf("get_last_default is not oldest first ending at the head: %+v", items)
	}

	items, err = cxdbcompat.DecodeTurnList(ok("get_last_payload", send("get_last_payload", onCtx)))
	if err != nil || len(items) != 5 {
		t.Fatalf("get_last_payload: %d items, %v", len(items), err)
	}
	for i, it := range items {
		if !bytes.Equal(it.Payload, payloads[it.TurnID]) || it.Compression != 0 || hashOf(it.Payload) != it.ContentHash {
			t.Fatalf("get_last_payload item %d: %+v", i, it)
		}
	}

	blob := fx["put_blob"]
	for i, wantNew := range []bool{true, false} {
		r, err := cxdbcompat.DecodePutBlobResponse(ok("put_blob", send("put_blob", nil)))
		if err != nil || r.WasNew != wantNew || !bytes.Equal(r.Hash[:], blob.Payload[:32]) {
			t.Fatalf("put_blob #%d: %+v %v, want was_new %v", i+1, r, err, wantNew)
		}
	}
	got, err := cxdbcompat.DecodeGetBlobResponse(c.expectOK(cxdbcompat.MsgGetBlob, 0, blob.Payload[:32]))
	if err != nil || string(got.Data) != "hello blob" {
		t.Fatalf("GET_BLOB: %q %v", got.Data, err)
	}

	for name := range fx {
		if !used[name] {
			t.Errorf("fixture %s was not replayed", name)
		}
	}
}
