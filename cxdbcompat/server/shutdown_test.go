package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
)

// waitListenerClosed waits until new connections are refused.
func waitListenerClosed(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return
		}
		conn.Close()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the listener still accepts after Shutdown")
}

// TestShutdownAnswersInFlightAppends holds appends inside the store, shuts
// down, and checks that Shutdown waits for them, that each is answered and
// stored, and that the connections close afterwards.
func TestShutdownAnswersInFlightAppends(t *testing.T) {
	t.Parallel()
	var g *gate
	e := newEnvWith(t, envConfig{wrap: func(en *store.Engine) store.TurnStore { g = newGate(en); return g }})
	t.Cleanup(g.release)
	ctx := testCtx(t)

	// Three official clients, one append each, and a raw connection with
	// five pipelined appends.
	const clients, pipelined = 3, 5
	type ack struct {
		res client.AppendResult
		err error
	}
	acks := make(chan ack, clients)
	var cs []*client.Client
	for i := range clients {
		c := e.dial()
		h, err := c.CreateContext(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		go func() {
			r, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: h.ContextID, TypeID: "t", Payload: []byte(fmt.Sprint("client ", i))})
			acks <- ack{r, err}
		}()
	}
	raw := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(raw.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	var stream []byte
	for i := range pipelined {
		stream = cxdbcompat.AppendFrame(stream, cxdbcompat.MsgAppendTurn, 0, uint64(100+i), appendReq(h.ContextID, 0, []byte(fmt.Sprint("raw ", i))).AppendTo(nil))
	}
	raw.write(stream)
	g.waitEntered(t, clients+pipelined)
	before := e.count(`SELECT count(*) FROM turns`)

	shutdown := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		shutdown <- e.srv.Shutdown(sctx)
	}()
	waitListenerClosed(t, e.addr)
	// A request written now is answered 503 (not started) unless it was
	// read before; if it is answered it must be stored, if not it must
	// not be.
	late := appendReq(h.ContextID, 0, []byte("late"))
	raw.send(cxdbcompat.MsgAppendTurn, 0, 999, late.AppendTo(nil))

	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned (%v) while appends were in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	g.release()
	select {
	case err := <-shutdown:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(ioTimeout):
		t.Fatal("Shutdown did not return after the appends finished")
	}

	var acked []uint64
	for range clients {
		a := <-acks
		if a.err != nil {
			t.Fatalf("in-flight client append: %v", a.err)
		}
		acked = append(acked, a.res.NewTurnID)
	}
	lateAnswered := false
	for {
		f, err := raw.read()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("raw connection not closed after Shutdown")
			}
			break // closed after the answers
		}
		if f.ReqID == 999 && f.Type == cxdbcompat.MsgError {
			requireError(t, f, 503) // received after Shutdown began: not started
			continue
		}
		if f.ReqID == 999 {
			lateAnswered = true
		}
		if f.Type != cxdbcompat.MsgAppendTurn {
			t.Fatalf("req %d: %s %s", f.ReqID, f.Type, describe(f))
		}
		r, _ := cxdbcompat.DecodeAppendTurnResponse(f.Payload)
		acked = append(acked, r.NewTurnID)
	}
	wantAcked := clients + pipelined
	if lateAnswered {
		wantAcked++
	}
	if len(acked) != wantAcked {
		t.Fatalf("%d appends answered, want %d", len(acked), wantAcked)
	}
	for _, id := range acked {
		if e.count(`SELECT count(*) FROM turns WHERE turn_id = $1`, int64(id)) != 1 {
			t.Fatalf("acknowledged turn %d is not stored", id)
		}
	}
	if got := e.count(`SELECT count(*) FROM turns`); got != before+len(acked) {
		t.Fatalf("%d turns stored, %d acknowledged", got-before, len(acked))
	}
	// The client connections are closed too.
	for _, c := range cs {
		if _, err := c.GetHead(ctx, 1); err == nil || errors.As(err, new(*client.ServerError)) {
			t.Fatalf("client still served after Shutdown: %v", err)
		}
	}
}

// TestShutdownUnderLoad shuts down while clients append as fast as they
// can: every acknowledged append is stored, every client is let go.
func TestShutdownUnderLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	const writers = 4
	var (
		mu     sync.Mutex
		acked  []uint64
		wg     sync.WaitGroup
		counts = make(chan struct{}, 1<<16)
	)
	for w := range writers {
		c := e.dial(client.WithPipelining())
		h, err := c.CreateContext(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 4 { // several appends in flight per connection
			wg.Go(func() {
				for i := 0; ; i++ {
					r, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: h.ContextID, TypeID: "t", Payload: []byte(fmt.Sprintf("%d/%d/%d", w, k, i))})
					if err != nil {
						// Answered 503 (received, not started) or cut;
						// any other server error is wrong.
						var se *client.ServerError
						if errors.As(err, &se) && se.Code != 503 {
							t.Errorf("append refused with %v, want an answer, 503 or a cut", err)
						}
						return
					}
					mu.Lock()
					acked = append(acked, r.NewTurnID)
					mu.Unlock()
					counts <- struct{}{}
				}
			})
		}
	}
	for range 100 {
		select {
		case <-counts:
		case <-time.After(ioTimeout):
			t.Fatal("appends are not progressing")
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	if err := e.srv.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	wg.Wait() // every writer got an answer or lost its connection
	mu.Lock()
	defer mu.Unlock()
	stored := map[uint64]bool{}
	rows, err := e.pool.Query(ctx, `SELECT turn_id FROM turns`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored[uint64(id)] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range acked {
		if !stored[id] {
			t.Fatalf("acknowledged turn %d is not stored", id)
		}
	}
	// Every stored turn was acknowledged: requests are read only before
	// Shutdown and every one that was read is answered.
	if len(stored) != len(acked) {
		t.Fatalf("%d turns stored, %d acknowledged", len(stored), len(acked))
	}
	t.Logf("%d appends acknowledged before and during Shutdown", len(acked))
}

// TestShutdownDeadlineCutsStuckRequests: when Shutdown's context ends
// while a request is stuck in the store, Shutdown returns the context's
// error promptly instead of waiting for the store.
func TestShutdownDeadlineCutsStuckRequests(t *testing.T) {
	t.Parallel()
	var g *gate
	e := newEnvWith(t, envConfig{
		wrap: func(en *store.Engine) store.TurnStore { g = newGate(en); return g },
		// the cancelled append is logged as a failed request
		allowErrorLogs: true,
	})
	t.Cleanup(g.release)
	raw := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(raw.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	raw.send(cxdbcompat.MsgAppendTurn, 0, 1, appendReq(h.ContextID, 0, []byte("stuck")).AppendTo(nil))
	g.waitEntered(t, 1)

	sctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	shutdown := make(chan error, 1)
	go func() { shutdown <- e.srv.Shutdown(sctx) }()
	select {
	case err := <-shutdown:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown = %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		g.release() // let the test end
		<-shutdown
		t.Fatal("Shutdown ignored its deadline: it waited for a request stuck in the store")
	}
	// The cancelled append may or may not get its 503 out before the
	// connection closes; nothing else comes.
	for {
		f, err := raw.read()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("connection not closed after Shutdown")
			}
			break
		}
		requireError(t, f, 503)
	}
	if n := e.count(`SELECT count(*) FROM turns`); n > 1 {
		t.Fatalf("%d turns stored", n)
	}
}

// TestShutdownDeadlineWithAPeerThatDoesNotRead: responses a peer never
// reads do not hold Shutdown past its deadline.
func TestShutdownDeadlineWithAPeerThatDoesNotRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	raw := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(raw.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	big := make([]byte, 256<<10)
	for i := range 4 {
		big[0] = byte(i)
		raw.expectOK(cxdbcompat.MsgAppendTurn, 0, appendReq(h.ContextID, 0, big).AppendTo(nil))
	}
	// 1 MiB answers, far more than the socket buffers hold.
	var stream []byte
	for i := range 200 {
		stream = cxdbcompat.AppendFrame(stream, cxdbcompat.MsgGetLast, 0, uint64(i+1),
			cxdbcompat.GetLastRequest{ContextID: h.ContextID, Limit: 4, IncludePayload: true}.AppendTo(nil))
	}
	raw.write(stream)
	// Wait until an answer is stuck: the socket buffers are full.
	for deadline := time.Now().Add(ioTimeout); e.srv.ReplyBytesHeld() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no answer got stuck on a peer that does not read")
		}
	}

	sctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := e.srv.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Shutdown took %v", d)
	}
}

// TestShutdownAnswersQueuedRequests503: with one request executing and
// more received behind it, Shutdown lets the executing one finish and
// answers the others ERROR 503 instead of closing the connection on them.
func TestShutdownAnswersQueuedRequests503(t *testing.T) {
	t.Parallel()
	var g *gate
	e := newEnvWith(t, envConfig{maxInFlight: 1, wrap: func(en *store.Engine) store.TurnStore { g = newGate(en); return g }})
	t.Cleanup(g.release)
	raw := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(raw.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	var stream []byte
	for i := range 4 {
		stream = cxdbcompat.AppendFrame(stream, cxdbcompat.MsgAppendTurn, 0, uint64(i+1), appendReq(h.ContextID, 0, []byte(fmt.Sprint("q", i))).AppendTo(nil))
	}
	raw.write(stream)
	g.waitEntered(t, 1) // request 1 executes; 2, 3 and 4 wait behind it
	shutdown := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		shutdown <- e.srv.Shutdown(sctx)
	}()
	waitListenerClosed(t, e.addr)
	g.release()
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	answers := map[uint64]cxdbcompat.MsgType{}
	for {
		f, err := raw.read()
		if err != nil {
			break
		}
		answers[f.ReqID] = f.Type
		if f.Type == cxdbcompat.MsgError {
			requireError(t, f, 503)
		}
	}
	if len(answers) != 4 || answers[1] != cxdbcompat.MsgAppendTurn {
		t.Fatalf("answers %v: want all four, the executing one a success", answers)
	}
	refused := 0
	for _, typ := range answers {
		if typ == cxdbcompat.MsgError {
			refused++
		}
	}
	if stored := e.count(`SELECT count(*) FROM turns`); stored != 4-refused || refused == 0 {
		t.Fatalf("%d refused, %d stored: every answered append is stored, every refused one is not, and some were refused", refused, stored)
	}
}

// A frame waiting for room in the request budget stops waiting when the
// server shuts down, though the frame holding the room is still being
// handled; what it held is given back.
func TestShutdownEndsFramesWaitingForRoom(t *testing.T) {
	var g *gate
	e := newEnvWith(t, envConfig{
		wrap: func(en *store.Engine) store.TurnStore { g = newGate(en); return g },
		options: func(o *server.Options) {
			o.MaxInFlightBytes = 1 // raised to one whole frame
			o.FrameTimeout = time.Hour
		},
	})
	t.Cleanup(g.release)
	held := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(held.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	held.send(cxdbcompat.MsgAppendTurn, 0, 1, appendReq(h.ContextID, 0, make([]byte, 40<<20)).AppendTo(nil))
	g.waitEntered(t, 1) // its 40 MiB stay charged while the store holds it

	waiting := dialRaw(t, e.addr)
	frame := cxdbcompat.AppendFrame(nil, cxdbcompat.MsgAppendTurn, 0, 2, appendReq(h.ContextID, 0, make([]byte, 40<<20)).AppendTo(nil))
	// The write blocks once the server stops reading; closing the
	// connection (cleanup) ends it.
	go func() { _, _ = waiting.conn.Write(frame) }()
	waitfor.True(t, "the second frame waiting for room", 2*time.Minute, func() bool {
		return gaugeValue(t, e.srv, "cardbox_binary_frames_waiting_for_room") == 1
	})

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shutdown <- e.srv.Shutdown(ctx)
	}()
	waitfor.True(t, "the wait ended by the shutdown", ioTimeout, func() bool {
		return gaugeValue(t, e.srv, "cardbox_binary_frames_waiting_for_room") == 0
	})
	g.release()
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if f := held.mustRead(); f.Type != cxdbcompat.MsgAppendTurn {
		t.Errorf("the held append was answered %s %s, want success", f.Type, describe(f))
	}
	if v := gaugeValue(t, e.srv, "cardbox_binary_request_bytes_held"); v != 0 {
		t.Errorf("cardbox_binary_request_bytes_held = %v after Shutdown, want 0", v)
	}
}
