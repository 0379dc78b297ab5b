package server_test

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
)

// Limits on what one client can make the server hold: idle and
// stalled sessions are closed, a peer that stops reading is disconnected,
// and none of it slows other clients down.

func TestIdleSessionIsClosed(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{options: func(o *server.Options) { o.IdleTimeout = time.Second }})
	c := dialRaw(t, e.addr)
	c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)) // a live session
	start := time.Now()
	c.expectClosed()
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout", waited)
	}
	e.requireServing()
}

func TestStalledFrameIsCutAndItsMemoryReturned(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{options: func(o *server.Options) {
		o.FrameTimeout = 2 * time.Second           // under load a writer may pause for a while
		o.MaxInFlightBytes = cxdbcompat.MaxPayload // one frame's worth
	}})
	// A frame announcing 64 MiB: its first 40 MiB arrive, then nothing.
	stalled := dialRaw(t, e.addr)
	hdr := cxdbcompat.AppendFrame(nil, cxdbcompat.MsgPutBlob, 0, 1, nil)
	copy(hdr, []byte{0, 0, 0, 4}) // len = 64 MiB
	stalled.write(hdr)
	stalled.write(make([]byte, 40<<20))
	stalled.expectClosed()
	// The budget is whole again: a full-size frame goes through.
	c := dialRaw(t, e.addr)
	blob := bytes.Repeat([]byte("x"), 32<<20) // fits only if the 40 MiB were returned
	req := cxdbcompat.PutBlobRequest{Hash: hashOf(blob), Data: blob}
	c.expectOK(cxdbcompat.MsgPutBlob, 0, req.AppendTo(nil))
}

func TestPeerThatStopsReadingIsDisconnected(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{options: func(o *server.Options) {
		o.WriteTimeout, o.MinWriteRate = 200*time.Millisecond, 64<<20
	}})
	c := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	for i := range 4 {
		c.expectOK(cxdbcompat.MsgAppendTurn, 0, appendReq(h.ContextID, 0, bytes.Repeat([]byte{byte(i)}, 2<<20)).AppendTo(nil))
	}
	// 64 GET_LAST of 8 MiB each, never read: far more than the socket
	// buffers hold.
	var reqs []byte
	for i := range 64 {
		get := cxdbcompat.GetLastRequest{ContextID: h.ContextID, Limit: 4, IncludePayload: true}
		reqs = cxdbcompat.AppendFrame(reqs, cxdbcompat.MsgGetLast, 0, uint64(i+1), get.AppendTo(nil))
	}
	c.write(reqs)
	// Meanwhile another client is served at once.
	other := dialRaw(t, e.addr)
	other.expectOK(cxdbcompat.MsgGetHead, 0, u64(h.ContextID))
	// The server gives up on the reader: reading now finds the connection
	// closed after whatever had been sent.
	_ = c.conn.SetReadDeadline(time.Now().Add(ioTimeout))
	for {
		if _, err := cxdbcompat.ReadFrame(c.r, nil); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("connection not closed within %v", ioTimeout)
			}
			break
		}
	}
	e.requireServing()
}

func TestRefusedConnectionHearsWhy(t *testing.T) {
	t.Parallel()
	client, srv := net.Pipe()
	go func() { server.RefuseConn(srv); srv.Close() }()
	c := &rawConn{t: t, connState: &connState{conn: client, r: bufio.NewReader(client)}}
	e := requireError(t, c.mustRead(), 503)
	if e.Kind != "TOO_MANY_CONNECTIONS" {
		t.Fatalf("refusal = %+v", e)
	}
}

func TestRequestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	c.expectOK(cxdbcompat.MsgGetHead, 0, u64(h.ContextID))
	c.expectOK(cxdbcompat.MsgGetHead, 0, u64(h.ContextID))
	c.expectError(cxdbcompat.MsgGetHead, 0, u64(h.ContextID+999), 404)
	c.expectError(cxdbcompat.MsgType(77), 0, nil, 422)
	want := `
# HELP cardbox_binary_requests_total Binary protocol requests answered, by message type and code (0: success, else the ERROR code).
# TYPE cardbox_binary_requests_total counter
cardbox_binary_requests_total{code="0",type="CTX_CREATE"} 1
cardbox_binary_requests_total{code="0",type="GET_HEAD"} 2
cardbox_binary_requests_total{code="422",type="unknown"} 1
cardbox_binary_requests_total{code="404",type="GET_HEAD"} 1
`
	if err := testutil.CollectAndCompare(e.srv.Collector(), strings.NewReader(want), "cardbox_binary_requests_total"); err != nil {
		t.Fatal(err)
	}
}

// One tenant's frames hold at most its share of the request budget: while
// acme's stalled frames hold all of its share, bravo's large frame is
// served at once, though without shares acme's frames would leave it too
// little room.
func TestTenantShareOfTheRequestBudget(t *testing.T) {
	// Not parallel: it moves 136 MiB through loopback, which under the race
	// detector beside the package's other tests once took over a minute.
	// Moving 80 MiB and then 56 MiB beside the whole suite can take a
	// while: the waits below are long, and end as soon as the bytes are
	// held.
	const patience = 120 * time.Second
	e := newEnvWith(t, envConfig{
		auth: apiKeys(map[string]string{"key-a": "acme", "key-b": "bravo"}),
		options: func(o *server.Options) {
			// acme's frames stay stalled throughout the waits: a server
			// that gave up on them sooner would release what they hold.
			o.FrameTimeout = 3 * patience
			o.MaxInFlightBytes = 2 * (cxdbcompat.MaxPayload + cxdbcompat.HeaderSize + 1)
			o.TenantShare = 0.5 // one frame's worth each
		},
	})
	e.tenant("acme")
	e.tenant("bravo")
	hello := func(key string) *rawConn {
		c := dialRaw(t, e.addr)
		c.expectOK(cxdbcompat.MsgHello, 0, cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientMetaJSON: []byte(`{"api_key":"` + key + `"}`)}.AppendTo(nil))
		return c
	}
	// Two acme frames announcing 64 MiB each, 40 MiB of each sent: 80 MiB
	// wanted, 64 MiB allowed. The second write blocks once the server
	// stops reading, so it runs on its own; the test ends it by closing.
	hdr := cxdbcompat.AppendFrame(nil, cxdbcompat.MsgPutBlob, 0, 1, nil)
	copy(hdr, []byte{0, 0, 0, 4}) // len = 64 MiB
	for range 2 {
		c := hello("key-a")
		t.Cleanup(c.close)
		go func() { _, _ = c.conn.Write(append(append([]byte{}, hdr...), make([]byte, 40<<20)...)) }()
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e.srv.Collector())
	held := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "cardbox_binary_request_bytes_held" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no cardbox_binary_request_bytes_held")
		return 0
	}
	// acme's share is one frame; the frame being read waits for room in
	// steps of at most a few MiB, so what acme holds ends within one step
	// of its share.
	share := float64(cxdbcompat.MaxPayload + cxdbcompat.HeaderSize + 1)
	full := share - 4<<20
	deadline := time.Now().Add(patience)
	for held() < full && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling what the server holds, bounded
	}
	if h := held(); h < full || h > share {
		t.Fatalf("acme's frames hold %.0f bytes, want its share %.0f (within 4 MiB)", h, share)
	}
	// bravo's frame gets room at once beside acme's share: 56 MiB of it
	// are read and charged (more than the 48 MiB acme would have left it
	// without shares). Only what the server holds is watched: building
	// and storing a blob that large is slow under the race detector.
	b := hello("key-b")
	t.Cleanup(b.close)
	go func() { _, _ = b.conn.Write(append(append([]byte{}, hdr...), make([]byte, 56<<20)...)) }()
	want := share + 56<<20 - 4<<20
	for held() < want && time.Now().Before(deadline.Add(patience)) {
		time.Sleep(10 * time.Millisecond) // polling what the server holds, bounded
	}
	if h := held(); h < want {
		t.Fatalf("with bravo's frame the server holds %.0f bytes, want acme's share and bravo's 56 MiB (%.0f)", h, want)
	}
}

// Large frames that the request budget cannot hold at once are served in
// turn: a frame waits holding nothing and takes all it needs at once.
// Here two frames of 63.5 MiB each hold their first MiB when they ask for
// the rest, while a third holds 40 MiB; had they waited holding their
// first MiB, neither rest would fit beside the other's MiB, and both
// would wait for the frame timeout.
func TestLargeFramesTakeTurnsInTheBudget(t *testing.T) {
	var g *gate
	e := newEnvWith(t, envConfig{
		wrap: func(en *store.Engine) store.TurnStore { g = newGate(en); return g },
		options: func(o *server.Options) {
			o.MaxInFlightBytes = 1 // raised to one whole frame
			o.FrameTimeout = time.Hour
		},
	})
	t.Cleanup(g.release)
	setup := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(setup.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	frame := func(i, size int) []byte {
		return cxdbcompat.AppendFrame(nil, cxdbcompat.MsgAppendTurn, 0, 1, appendReq(h.ContextID, 0, bytes.Repeat([]byte{byte(i)}, size)).AppendTo(nil))
	}
	held := func() float64 { return gaugeValue(t, e.srv, "cardbox_binary_request_bytes_held") }

	first := dialRaw(t, e.addr)
	go func() { _, _ = first.conn.Write(frame(0, 40<<20)) }() // ends with the connection if the test fails
	g.waitEntered(t, 1)                                       // its 40 MiB stay charged while the store holds it
	base := held()

	// Each large frame is read into its first MiB (the server charges it
	// and waits for more bytes), then sent whole.
	const head = 700 << 10
	const headCharge = 1<<20 - 64<<10 // the first MiB, less the free 64 KiB
	var large []*rawConn
	var rests [][]byte
	for i := range 2 {
		c := dialRaw(t, e.addr)
		f := frame(i+1, 63<<20+512<<10)
		c.write(f[:head])
		want := base + float64((i+1)*headCharge)
		waitfor.True(t, "the first MiB charged", time.Minute, func() bool { return held() == want })
		large, rests = append(large, c), append(rests, f[head:])
	}
	for i, c := range large {
		go func() { _, _ = c.conn.Write(rests[i]) }() // ends with the connection if the test fails
	}
	waitfor.True(t, "both large frames waiting for room", 2*time.Minute, func() bool {
		return gaugeValue(t, e.srv, "cardbox_binary_frames_waiting_for_room") == 2
	})
	g.release()
	for i, c := range append([]*rawConn{first}, large...) {
		_ = c.conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
		f, err := cxdbcompat.ReadFrame(c.r, nil)
		if err != nil {
			t.Fatalf("frame %d: no answer: %v", i, err)
		}
		if f.Type != cxdbcompat.MsgAppendTurn {
			t.Fatalf("frame %d: answered %s %s, want success", i, f.Type, describe(f))
		}
	}
}
