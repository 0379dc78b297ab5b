package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/store"
)

// longText is n bytes of varied ASCII (so Postgres cannot compress it
// below its index row limit).
func longText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%x", i*2654435761)
	}
	return b.String()[:n]
}

// TestOverlongIdentifiersAreRefused: a declared type id or idempotency key
// past Postgres' btree row limit (~2.7 kB) must be refused as bad input,
// not fail the commit with a 500.
func TestOverlongIdentifiersAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	longType := appendReq(h.ContextID, 0, []byte("a"))
	longType.DeclaredTypeID = longText(3000)
	longKey := appendReq(h.ContextID, 0, []byte("b"))
	longKey.IdempotencyKey = []byte(longText(3000))
	for name, req := range map[string]cxdbcompat.AppendTurnRequest{"type id": longType, "idempotency key": longKey} {
		before := e.snapshot()
		f := c.call(cxdbcompat.MsgAppendTurn, 0, req.AppendTo(nil))
		if f.Type != cxdbcompat.MsgError {
			continue // accepted and stored is fine too
		}
		if er, _ := cxdbcompat.DecodeErrorResponse(f.Payload); er.Code != 400 && er.Code != 422 {
			t.Errorf("3000-byte %s: ERROR %d %s: %s, want 400 or 422", name, er.Code, er.Kind, er.Message)
		}
		e.requireUnchanged(before, "refused "+name)
	}
}

// TestTypeIDWithNULIsRefused: a type id with a NUL byte is valid UTF-8 on
// the wire but cannot be stored in a Postgres text column; it must be
// refused as bad input, not fail the commit with a 500.
func TestTypeIDWithNULIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	req := appendReq(h.ContextID, 0, []byte("a"))
	req.DeclaredTypeID = "cxdb.Conversation\x00Item"
	before := e.snapshot()
	f := c.call(cxdbcompat.MsgAppendTurn, 0, req.AppendTo(nil))
	if f.Type != cxdbcompat.MsgError {
		t.Fatalf("type id with NUL accepted: %s", describe(f))
	}
	if er, _ := cxdbcompat.DecodeErrorResponse(f.Payload); er.Code != 400 && er.Code != 422 {
		t.Fatalf("type id with NUL: ERROR %d %s: %s, want 400 or 422", er.Code, er.Kind, er.Message)
	}
	e.requireUnchanged(before, "refused type id")
}

// TestOneBadAppendDoesNotFailOthers: appends that share a group commit
// with a bad one (here an over-long type id) must still succeed; today one
// writer's bad input fails everyone's appends in its group, across
// tenants.
func TestOneBadAppendDoesNotFailOthers(t *testing.T) {
	t.Parallel()
	var g *gate
	e := newEnvWith(t, envConfig{
		wrap:           func(en *store.Engine) store.TurnStore { g = newGate(en); return g },
		allowErrorLogs: true,
	})
	t.Cleanup(g.release)
	const good = 30
	bad := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(bad.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	poison := appendReq(h.ContextID, 0, []byte("poison"))
	poison.DeclaredTypeID = longText(3000)
	bad.send(cxdbcompat.MsgAppendTurn, 0, 1, poison.AppendTo(nil))

	conns := make([]*rawConn, good)
	for i := range conns {
		conns[i] = dialRaw(t, e.addr)
		conns[i].send(cxdbcompat.MsgAppendTurn, 0, 1, appendReq(h.ContextID, 0, []byte(fmt.Sprint("good ", i))).AppendTo(nil))
	}
	g.waitEntered(t, good+1)
	g.release() // all of them reach the committer together
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			f, err := c.read()
			if err != nil {
				t.Errorf("good append %d: %v", i, err)
			} else if f.Type != cxdbcompat.MsgAppendTurn {
				t.Errorf("good append %d failed: %s", i, describe(f))
			}
		})
	}
	wg.Wait()
	_, _ = bad.read()
}

// TestAcknowledgedTurnsAreReadable: a turn the server acknowledged must be
// readable with the protocol. A zstd payload that inflates to exactly
// 64 MiB is accepted, but neither GET_LAST (with payload) nor GET_BLOB can
// return it in a frame: both answer 500.
func TestAcknowledgedTurnsAreReadable(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{allowErrorLogs: true})
	c := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Close()
	big := make([]byte, cxdbcompat.MaxPayload)
	req := appendReq(h.ContextID, 0, big)
	req.Compression, req.Payload = cxdbcompat.CompressionZstd, zw.EncodeAll(big, nil)
	if f := c.call(cxdbcompat.MsgAppendTurn, 0, req.AppendTo(nil)); f.Type == cxdbcompat.MsgError {
		requireError(t, f, 422) // refusing it is the other correct answer
		return
	}
	if f := c.call(cxdbcompat.MsgGetLast, 0, cxdbcompat.GetLastRequest{ContextID: h.ContextID, Limit: 1, IncludePayload: true}.AppendTo(nil)); f.Type != cxdbcompat.MsgGetLast {
		t.Errorf("GET_LAST of the acknowledged turn: %s", describe(f))
	}
	if f := c.call(cxdbcompat.MsgGetBlob, 0, req.ContentHash[:]); f.Type != cxdbcompat.MsgGetBlob {
		t.Errorf("GET_BLOB of the acknowledged payload: %s", describe(f))
	}
}
