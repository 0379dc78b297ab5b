package server_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// TestPipelinedRawFrames writes hundreds of mixed requests with distinct,
// unordered req_ids back-to-back in one write, then checks that each gets
// exactly one answer of the right type, matched by req_id, with the server
// allowed to answer in any order (and with a per-connection limit of 1,
// 4 and the default on requests in flight).
func TestPipelinedRawFrames(t *testing.T) {
	t.Parallel()
	for _, inFlight := range []int{1, 4, 0} {
		t.Run(fmt.Sprint("max_in_flight_", inFlight), func(t *testing.T) {
			t.Parallel()
			e := newEnvWith(t, envConfig{maxInFlight: inFlight})
			setup := dialRaw(t, e.addr)
			const contexts = 4
			var ctxIDs []uint64
			for range contexts {
				h, _ := cxdbcompat.DecodeHeadResponse(setup.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
				ctxIDs = append(ctxIDs, h.ContextID)
			}

			type expect struct {
				typ  cxdbcompat.MsgType
				code uint32 // for ERROR
				ctx  uint64 // for appends
				data []byte // blob / payload
			}
			rng := rand.New(rand.NewPCG(1, 2))
			want := map[uint64]expect{}
			var stream []byte
			const n = 400
			for i := range n {
				var id uint64
				for id == 0 || want[id].typ != 0 {
					id = rng.Uint64()
				}
				ctxID := ctxIDs[i%contexts]
				var req cxdbcompat.Request
				x := expect{}
				switch i % 8 {
				case 0, 1, 2, 3:
					p := []byte(fmt.Sprintf("\xa9pipe %04d", i))
					req, x = appendReq(ctxID, 0, p), expect{typ: cxdbcompat.MsgAppendTurn, ctx: ctxID, data: p}
				case 4:
					req, x.typ = cxdbcompat.GetLastRequest{ContextID: ctxID, Limit: 3, IncludePayload: true}, cxdbcompat.MsgGetLast
				case 5:
					d := []byte(fmt.Sprintf("blob %d", i))
					req, x = cxdbcompat.PutBlobRequest{Hash: hashOf(d), Data: d}, expect{typ: cxdbcompat.MsgPutBlob, data: d}
				case 6:
					req, x.typ = cxdbcompat.GetHeadRequest{ContextID: ctxID}, cxdbcompat.MsgGetHead
				case 7:
					req, x = cxdbcompat.GetHeadRequest{ContextID: 1 << 40}, expect{typ: cxdbcompat.MsgError, code: 404}
				}
				want[id] = x
				stream = cxdbcompat.AppendFrame(stream, req.MsgType(), req.Flags(), id, req.AppendTo(nil))
			}

			c := dialRaw(t, e.addr)
			c.expectOK(cxdbcompat.MsgHello, 0, nil)
			got := make(chan cxdbcompat.Frame, n)
			readErr := make(chan error, 1)
			go func() {
				for range n {
					f, err := c.read()
					if err != nil {
						readErr <- err
						return
					}
					got <- f
				}
				close(got)
			}()
			c.write(stream)

			seen := map[uint64]bool{}
			turnsOf := map[uint64][]uint64{}
			for range n {
				var f cxdbcompat.Frame
				select {
				case f = <-got:
				case err := <-readErr:
					t.Fatalf("after %d responses: %v", len(seen), err)
				}
				x, ok := want[f.ReqID]
				if !ok || seen[f.ReqID] {
					t.Fatalf("response for req_id %d: unknown or duplicate", f.ReqID)
				}
				seen[f.ReqID] = true
				if x.typ == cxdbcompat.MsgError {
					requireError(t, f, x.code)
					continue
				}
				if f.Type != x.typ {
					t.Fatalf("req %d: got %s %s, want %s", f.ReqID, f.Type, describe(f), x.typ)
				}
				switch x.typ {
				case cxdbcompat.MsgAppendTurn:
					r, err := cxdbcompat.DecodeAppendTurnResponse(f.Payload)
					if err != nil || r.ContextID != x.ctx || r.ContentHash != hashOf(x.data) {
						t.Fatalf("append req %d: %+v %v", f.ReqID, r, err)
					}
					turnsOf[x.ctx] = append(turnsOf[x.ctx], r.NewTurnID)
				case cxdbcompat.MsgPutBlob:
					r, err := cxdbcompat.DecodePutBlobResponse(f.Payload)
					if err != nil || r.Hash != hashOf(x.data) || !r.WasNew {
						t.Fatalf("put blob req %d: %+v %v", f.ReqID, r, err)
					}
				case cxdbcompat.MsgGetLast:
					if _, err := cxdbcompat.DecodeTurnList(f.Payload); err != nil {
						t.Fatalf("get last req %d: %v", f.ReqID, err)
					}
				}
			}
			// Each context is one linear chain holding exactly its appends.
			for _, ctxID := range ctxIDs {
				chain, err := cxdbcompat.DecodeTurnList(setup.expectOK(cxdbcompat.MsgGetLast, 0,
					cxdbcompat.GetLastRequest{ContextID: ctxID, Limit: n, IncludePayload: true}.AppendTo(nil)))
				if err != nil || len(chain) != len(turnsOf[ctxID]) {
					t.Fatalf("context %d: %d turns (%v), %d appends acknowledged", ctxID, len(chain), err, len(turnsOf[ctxID]))
				}
				acked := map[uint64]bool{}
				for _, id := range turnsOf[ctxID] {
					acked[id] = true
				}
				for i, turn := range chain {
					if turn.Depth != uint32(i+1) || !acked[turn.TurnID] || !bytes.HasPrefix(turn.Payload, []byte("\xa9pipe ")) {
						t.Fatalf("context %d turn %d: %+v", ctxID, i, turn)
					}
				}
			}
		})
	}
}

// TestPipelinedClient runs many typed calls at once on one client with
// WithPipelining.
func TestPipelinedClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.dial(client.WithPipelining())
	ctx := testCtx(t)
	const workers, each = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	heads := make([]uint64, workers)
	for w := range workers {
		wg.Go(func() {
			h, err := c.CreateContext(ctx, 0)
			if err != nil {
				errs <- err
				return
			}
			heads[w] = h.ContextID
			var last client.AppendResult
			for i := range each {
				p := []byte(fmt.Sprintf("w%d-%d", w, i))
				r, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: h.ContextID, TypeID: "t", TypeVersion: 1, Payload: p})
				if err != nil {
					errs <- err
					return
				}
				if r.ContextID != h.ContextID || r.NewDepth != uint32(i+1) || r.ContentHash != hashOf(p) {
					errs <- fmt.Errorf("worker %d append %d: %+v", w, i, r)
					return
				}
				last = r
				if _, err := c.GetHead(ctx, h.ContextID); err != nil {
					errs <- err
					return
				}
			}
			turns, err := c.GetLast(ctx, h.ContextID, each, true)
			if err != nil || len(turns) != each || turns[each-1].TurnID != last.NewTurnID {
				errs <- fmt.Errorf("worker %d: GetLast %d turns, %v", w, len(turns), err)
				return
			}
			for i, turn := range turns {
				if string(turn.Payload) != fmt.Sprintf("w%d-%d", w, i) {
					errs <- fmt.Errorf("worker %d turn %d payload %q", w, i, turn.Payload)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := e.count(`SELECT count(*) FROM turns`); n != workers*each {
		t.Fatalf("turn rows = %d, want %d", n, workers*each)
	}
}

// oneContext starts a server and opens a raw connection that said HELLO
// and created a context.
func oneContext(t *testing.T) (*env, *rawConn, uint64) {
	t.Helper()
	return oneContextLingering(t, 0)
}

// oneContextLingering is oneContext on a server whose extra idle handlers
// linger for linger before they end (the default when 0).
func oneContextLingering(t *testing.T, linger time.Duration) (*env, *rawConn, uint64) {
	t.Helper()
	e := newEnvWith(t, envConfig{options: func(o *server.Options) { server.SetHandlerLinger(o, linger) }})
	c := dialRaw(t, e.addr)
	c.expectOK(cxdbcompat.MsgHello, 0, nil)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	return e, c, h.ContextID
}

// pipelineAppends sends n appends to ctxID at once, so that each gets a
// handler while the others wait for their commit, and reads their answers.
func pipelineAppends(t *testing.T, c *rawConn, ctxID uint64, n int) {
	t.Helper()
	sendAppends(c, ctxID, n)
	readAnswers(t, c, n)
}

// sendAppends sends n appends to ctxID in one write.
func sendAppends(c *rawConn, ctxID uint64, n int) {
	var stream []byte
	for i := range n {
		req := appendReq(ctxID, 0, []byte(fmt.Sprintf("\xa9burst %02d", i)))
		stream = cxdbcompat.AppendFrame(stream, req.MsgType(), req.Flags(), uint64(5000+i), req.AppendTo(nil))
	}
	c.write(stream)
}

// readAnswers reads n answers to appends.
func readAnswers(t *testing.T, c *rawConn, n int) {
	t.Helper()
	for range n {
		if f := c.mustRead(); f.Type != cxdbcompat.MsgAppendTurn {
			t.Fatalf("got %s %s, want an append's answer", f.Type, describe(f))
		}
	}
}

// TestPipelinedHandlersAreReused keeps many appends in flight on one
// connection, burst after burst, and checks that the handlers of one burst
// serve the next while they linger: without, each burst starts a
// goroutine for nearly every append, whose stack grows on each.
func TestPipelinedHandlersAreReused(t *testing.T) {
	t.Parallel()
	e, c, ctxID := oneContextLingering(t, time.Hour)
	const n = 60
	pipelineAppends(t, c, ctxID, n)
	first, _ := handlers(t, e.srv)
	if first <= server.MaxIdleHandlers {
		t.Fatalf("only %d handlers started for %d pipelined appends: the test needs more", first, n)
	}
	for range 3 {
		pipelineAppends(t, c, ctxID, n)
	}
	if started, _ := handlers(t, e.srv); started-first > n/4 {
		t.Errorf("%d more handlers started for three more bursts of %d appends, after %d for the first; want the first's reused", started-first, n, first)
	}
}

// gatedListener counts the writes to the connections it accepts, and can
// hold the next one until released.
type gatedListener struct {
	net.Listener
	writes atomic.Int64
	held   atomic.Pointer[chan struct{}] // the next write waits for it to close
}

func (l *gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: c, l: l}, nil
}

// holdNextWrite makes the next write wait until release is called.
func (l *gatedListener) holdNextWrite() (release func()) {
	ch := make(chan struct{})
	l.held.Store(&ch)
	return func() { close(ch) }
}

type gatedConn struct {
	net.Conn
	l *gatedListener
}

func (c *gatedConn) Write(b []byte) (int, error) {
	c.l.writes.Add(1)
	if ch := c.l.held.Swap(nil); ch != nil {
		<-*ch
	}
	return c.Conn.Write(b)
}

// TestAnswersReadyDuringAWriteShareOne holds the write of a pipelined
// append's answer until the others are ready, and checks that those go out
// together in one more write, not one each.
func TestAnswersReadyDuringAWriteShareOne(t *testing.T) {
	t.Parallel()
	gated := &gatedListener{}
	e := newEnvWith(t, envConfig{listener: func(l net.Listener) net.Listener { gated.Listener = l; return gated }})
	c := dialRaw(t, e.addr)
	c.expectOK(cxdbcompat.MsgHello, 0, nil)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	release := gated.holdNextWrite()
	before := gated.writes.Load()
	const n = 40
	sendAppends(c, h.ContextID, n)
	waitfor.True(t, "one answer's write to be held and the others to wait behind it", 10*time.Second, func() bool {
		return gated.writes.Load() == before+1 && e.srv.RepliesWaiting() == n-1
	})
	release()
	readAnswers(t, c, n)
	if w := gated.writes.Load() - before; w != 2 {
		t.Errorf("%d answers took %d writes, want 2 (the held one, then the rest together)", n, w)
	}
}

// handlers returns how many request handlers the server started so far
// and how many run now, from its Prometheus collector.
func handlers(t *testing.T, srv *server.Server) (started, running int64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(srv.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "cardbox_binary_request_handlers_started_total":
			started = int64(f.GetMetric()[0].GetCounter().GetValue())
		case "cardbox_binary_request_handlers":
			running = int64(f.GetMetric()[0].GetGauge().GetValue())
		}
	}
	return started, running
}

// TestHandlersAreReused sends requests one after another on one connection
// and checks that they were served by a kept handler rather than one new
// goroutine each, and that the handlers end with the connection.
func TestHandlersAreReused(t *testing.T) {
	t.Parallel()
	e, c, ctxID := oneContext(t)
	const n = 50
	for i := range n {
		req := appendReq(ctxID, 0, []byte(fmt.Sprintf("\xa9reuse %02d", i)))
		c.expectOK(req.MsgType(), req.Flags(), req.AppendTo(nil))
	}
	// A handler may rarely start beside an idle one that had not yet
	// reached its wait; one per request would be n+1.
	if started, _ := handlers(t, e.srv); started > n/2 {
		t.Errorf("%d handlers started for %d requests in sequence; want them reused", started, n+1)
	}
	c.close()
	waitfor.True(t, "the connection's handlers to end", 10*time.Second, func() bool {
		_, running := handlers(t, e.srv)
		return running == 0
	})
}

// TestIdleHandlersAreBounded pipelines many appends on one connection, so
// that each gets a handler while the others wait for their commit, and
// checks that once all are answered the connection keeps only a few.
func TestIdleHandlersAreBounded(t *testing.T) {
	t.Parallel()
	e, c, ctxID := oneContextLingering(t, 50*time.Millisecond)
	const n = 60
	pipelineAppends(t, c, ctxID, n)
	if started, _ := handlers(t, e.srv); started <= server.MaxIdleHandlers {
		t.Fatalf("only %d handlers started for %d pipelined appends: the test needs more", started, n)
	}
	waitfor.True(t, "idle handlers to shrink to the bound", 10*time.Second, func() bool {
		_, running := handlers(t, e.srv)
		return running <= server.MaxIdleHandlers
	})
}
