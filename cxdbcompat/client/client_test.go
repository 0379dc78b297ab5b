package client

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, addr string, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(testCtx(t), addr, opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func repeatHash(b byte) Hash {
	var h Hash
	for i := range h {
		h[i] = b
	}
	return h
}

// fixture loads one protocol fixture of the codec package.
func fixture(t *testing.T, name string) (cxdbcompat.MsgType, uint16, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "fixtures", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		MsgType    cxdbcompat.MsgType `json:"msg_type"`
		Flags      uint16             `json:"flags"`
		PayloadHex string             `json:"payload_hex"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	p, err := hex.DecodeString(f.PayloadHex)
	if err != nil {
		t.Fatal(err)
	}
	return f.MsgType, f.Flags, p
}

// cannedReplies answers every request with a valid response of its type.
func cannedReplies(r *replier, f cxdbcompat.Frame) bool {
	var p []byte
	switch f.Type {
	case cxdbcompat.MsgCtxCreate, cxdbcompat.MsgCtxFork, cxdbcompat.MsgGetHead:
		p = cxdbcompat.HeadResponse{ContextID: 1}.AppendTo(nil)
	case cxdbcompat.MsgAppendTurn:
		p = cxdbcompat.AppendTurnResponse{ContextID: 1, NewTurnID: 1, NewDepth: 1}.AppendTo(nil)
	case cxdbcompat.MsgGetLast, cxdbcompat.MsgGetBefore:
		p = cxdbcompat.AppendTurnList(nil, nil)
	case cxdbcompat.MsgPutBlob:
		p = cxdbcompat.PutBlobResponse{WasNew: true}.AppendTo(nil)
	case cxdbcompat.MsgAttachFS:
		p = cxdbcompat.AttachFSResponse{}.AppendTo(nil)
	case cxdbcompat.MsgGetBlob:
		p = cxdbcompat.GetBlobResponse{}.AppendTo(nil)
	}
	r.reply(f.ReqID, f.Type, p)
	return true
}

// TestWireMatchesFixtures checks that each method sends byte-for-byte the
// payload recorded from the official client.
func TestWireMatchesFixtures(t *testing.T) {
	fsRoot := repeatHash(0xBB)
	appendReq := func(parent uint64, payload []byte) *AppendRequest {
		return &AppendRequest{ContextID: 1, ParentTurnID: parent, TypeID: "cxdb.ConversationItem", TypeVersion: 3, Payload: payload}
	}
	tests := []struct {
		fixture string
		call    func(ctx context.Context, c *Client) error
	}{
		{"ctx_create_base0", func(ctx context.Context, c *Client) error { _, err := c.CreateContext(ctx, 0); return err }},
		{"ctx_fork_base123", func(ctx context.Context, c *Client) error { _, err := c.ForkContext(ctx, 123); return err }},
		{"get_head_ctx42", func(ctx context.Context, c *Client) error { _, err := c.GetHead(ctx, 42); return err }},
		{"append_parent0", func(ctx context.Context, c *Client) error {
			_, err := c.AppendTurn(ctx, appendReq(0, []byte{0x91, 0x01}))
			return err
		}},
		{"append_parent7", func(ctx context.Context, c *Client) error {
			_, err := c.AppendTurn(ctx, appendReq(7, []byte{0x91, 0x02}))
			return err
		}},
		{"append_idempotent", func(ctx context.Context, c *Client) error {
			r := appendReq(0, []byte{0x91, 0x03})
			r.IdempotencyKey = "idem-1"
			_, err := c.AppendTurn(ctx, r)
			return err
		}},
		{"append_with_fs", func(ctx context.Context, c *Client) error {
			r := appendReq(0, []byte{0x91, 0x04})
			r.FSRootHash = &fsRoot
			_, err := c.AppendTurn(ctx, r)
			return err
		}},
		{"get_last_default", func(ctx context.Context, c *Client) error { _, err := c.GetLast(ctx, 1, 0, false); return err }},
		{"get_last_payload", func(ctx context.Context, c *Client) error { _, err := c.GetLast(ctx, 1, 5, true); return err }},
		{"attach_fs", func(ctx context.Context, c *Client) error {
			_, err := c.AttachFS(ctx, 99, repeatHash(0xAA))
			return err
		}},
		{"put_blob", func(ctx context.Context, c *Client) error {
			_, _, err := c.PutBlob(ctx, []byte("hello blob"))
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			srv := startFakeServer(t, helloFirst(cannedReplies))
			c := dial(t, srv.addr())
			if err := tc.call(testCtx(t), c); err != nil {
				t.Fatalf("call: %v", err)
			}
			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(reqs))
			}
			typ, flags, payload := fixture(t, tc.fixture)
			got := reqs[0]
			if got.Type != typ || got.Flags != flags || !bytes.Equal(got.Payload, payload) {
				t.Errorf("sent %s flags %d %x\nwant %s flags %d %x", got.Type, got.Flags, got.Payload, typ, flags, payload)
			}
		})
	}
}

func TestDialSendsHello(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		want []byte
	}{
		{"no tag", nil, mustFixturePayload(t, "hello_empty")},
		{"tag", []Option{WithClientTag("test-client")}, mustFixturePayload(t, "hello_tag")},
		{"meta", []Option{WithClientTag("t"), WithClientMeta([]byte(`{"api_key":"k"}`))},
			cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientTag: "t", ClientMetaJSON: []byte(`{"api_key":"k"}`)}.AppendTo(nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startFakeServer(t, helloFirst(cannedReplies))
			c := dial(t, srv.addr(), tc.opts...)
			if c.SessionID() != 7 {
				t.Errorf("SessionID = %d, want 7", c.SessionID())
			}
			frames := srv.allFrames()
			if len(frames) != 1 || frames[0].Type != cxdbcompat.MsgHello || frames[0].Flags != 0 {
				t.Fatalf("frames = %+v, want one HELLO", frames)
			}
			if !bytes.Equal(frames[0].Payload, tc.want) {
				t.Errorf("HELLO payload %x, want %x", frames[0].Payload, tc.want)
			}
		})
	}
}

func mustFixturePayload(t *testing.T, name string) []byte {
	t.Helper()
	_, _, p := fixture(t, name)
	return p
}

func TestDialErrors(t *testing.T) {
	t.Run("invalid meta", func(t *testing.T) {
		srv := startFakeServer(t, helloFirst(cannedReplies))
		if _, err := Dial(testCtx(t), srv.addr(), WithClientMeta([]byte("{"))); err == nil {
			t.Fatal("Dial accepted invalid meta JSON")
		}
	})
	t.Run("hello rejected", func(t *testing.T) {
		srv := startFakeServer(t, func(r *replier, f cxdbcompat.Frame) bool {
			r.replyError(f.ReqID, 401, "UNAUTHENTICATED", "bad api key")
			return true
		})
		_, err := Dial(testCtx(t), srv.addr())
		var se *ServerError
		if !errors.As(err, &se) || se.Code != 401 || se.Kind != "UNAUTHENTICATED" {
			t.Fatalf("err = %v, want ServerError 401", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, err := Dial(testCtx(t), addr); err == nil {
			t.Fatal("Dial succeeded against a closed port")
		}
	})
	t.Run("server closes", func(t *testing.T) {
		srv := startFakeServer(t, func(*replier, cxdbcompat.Frame) bool { return false })
		if _, err := Dial(testCtx(t), srv.addr()); !errors.Is(err, io.EOF) {
			t.Fatalf("err = %v, want EOF", err)
		}
	})
}

func TestEndToEnd(t *testing.T) {
	store := newMemStore(t)
	srv := startFakeServer(t, store.handle)
	c := dial(t, srv.addr(), WithClientTag("e2e"))
	ctx := testCtx(t)

	head, err := c.CreateContext(ctx, 0)
	if err != nil || head != (ContextHead{ContextID: 1}) {
		t.Fatalf("CreateContext = %+v, %v", head, err)
	}
	var ids []uint64
	for i := range 4 {
		res, err := c.AppendTurn(ctx, &AppendRequest{
			ContextID: head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3,
			Payload: []byte{0x91, byte(i)}, CompressZstd: i%2 == 1,
		})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if res.NewDepth != uint32(i+1) || res.ContentHash != blake3.Sum256([]byte{0x91, byte(i)}) {
			t.Errorf("append %d = %+v", i, res)
		}
		ids = append(ids, res.NewTurnID)
	}
	if h, err := c.GetHead(ctx, head.ContextID); err != nil || h.HeadTurnID != ids[3] || h.HeadDepth != 4 {
		t.Fatalf("GetHead = %+v, %v", h, err)
	}

	turns, err := c.GetLast(ctx, head.ContextID, 3, true)
	if err != nil || len(turns) != 3 {
		t.Fatalf("GetLast = %d turns, %v", len(turns), err)
	}
	for i, tr := range turns {
		if tr.TurnID != ids[i+1] || !bytes.Equal(tr.Payload, []byte{0x91, byte(i + 1)}) || tr.Compression != 0 {
			t.Errorf("GetLast[%d] = %+v", i, tr)
		}
	}
	meta, err := c.GetLast(ctx, head.ContextID, 0, false)
	if err != nil || len(meta) != 4 || len(meta[0].Payload) != 0 || meta[1].Compression != cxdbcompat.CompressionZstd {
		t.Fatalf("GetLast without payload = %+v, %v", meta, err)
	}
	before, err := c.GetBefore(ctx, head.ContextID, ids[3], 2, true)
	if err != nil || len(before) != 2 || before[0].TurnID != ids[1] || before[1].TurnID != ids[2] {
		t.Fatalf("GetBefore = %+v, %v", before, err)
	}

	fork, err := c.ForkContext(ctx, ids[1])
	if err != nil || fork.ContextID != 2 || fork.HeadTurnID != ids[1] || fork.HeadDepth != 2 {
		t.Fatalf("ForkContext = %+v, %v", fork, err)
	}

	tree := []byte("tree object")
	hash, wasNew, err := c.PutBlob(ctx, tree)
	if err != nil || !wasNew || hash != blake3.Sum256(tree) {
		t.Fatalf("PutBlob = %s %v %v", hash, wasNew, err)
	}
	if _, wasNew, err = c.PutBlob(ctx, tree); err != nil || wasNew {
		t.Fatalf("second PutBlob wasNew = %v, %v", wasNew, err)
	}
	if got, err := c.GetBlob(ctx, hash); err != nil || !bytes.Equal(got, tree) {
		t.Fatalf("GetBlob = %q, %v", got, err)
	}
	if a, err := c.AttachFS(ctx, ids[0], hash); err != nil || a.TurnID != ids[0] || a.FSRootHash != hash {
		t.Fatalf("AttachFS = %+v, %v", a, err)
	}
	res, err := c.AppendTurn(ctx, &AppendRequest{ContextID: fork.ContextID, TypeID: "t", Payload: []byte{1}, FSRootHash: &hash})
	if err != nil || res.NewDepth != 3 {
		t.Fatalf("append with fs root = %+v, %v", res, err)
	}
}

func TestServerErrors(t *testing.T) {
	store := newMemStore(t)
	srv := startFakeServer(t, store.handle)
	c := dial(t, srv.addr())
	ctx := testCtx(t)

	_, err := c.GetHead(ctx, 99)
	var se *ServerError
	if !errors.As(err, &se) || se.Code != 404 || se.Kind != "NOT_FOUND" || se.Message != "context not found" {
		t.Fatalf("GetHead unknown = %v", err)
	}
	if !errors.Is(err, ErrNotFound) {
		t.Error("404 ServerError does not match ErrNotFound")
	}
	if _, err := c.GetBlob(ctx, repeatHash(1)); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetBlob unknown = %v", err)
	}
	h, _ := c.CreateContext(ctx, 0)
	_, err = c.AppendTurn(ctx, &AppendRequest{ContextID: h.ContextID, TypeID: "t", Payload: []byte("x"), Compression: cxdbcompat.CompressionZstd})
	if !errors.As(err, &se) || se.Code != 422 || errors.Is(err, ErrNotFound) {
		t.Fatalf("append with the official compression quirk = %v, want 422", err)
	}
	// The connection survives server errors.
	if _, err := c.GetHead(ctx, h.ContextID); err != nil {
		t.Fatalf("GetHead after errors: %v", err)
	}
}

func TestServerErrorDetails(t *testing.T) {
	tests := []struct {
		name    string
		payload []byte
		want    ServerError
	}{
		{"json", cxdbcompat.ErrorResponse{Code: 409, Kind: "CONFLICT", Message: "m"}.AppendTo(nil), ServerError{409, "CONFLICT", "m"}},
		{"plain text", append([]byte{0x16, 1, 0, 0, 16, 0, 0, 0}, "unknown msg_type"...), ServerError{278, "", "unknown msg_type"}},
		{"short", []byte{1, 2}, ServerError{0, "", "unknown error"}},
		{"detail overflows", []byte{0x94, 1, 0, 0, 9, 0, 0, 0, 'x'}, ServerError{404, "", "unknown error"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startFakeServer(t, helloFirst(func(r *replier, f cxdbcompat.Frame) bool {
				r.reply(f.ReqID, cxdbcompat.MsgError, tc.payload)
				return true
			}))
			c := dial(t, srv.addr())
			_, err := c.GetHead(testCtx(t), 1)
			var se *ServerError
			if !errors.As(err, &se) || *se != tc.want {
				t.Fatalf("err = %#v, want %#v", err, tc.want)
			}
			if !strings.Contains(se.Error(), tc.want.Message) {
				t.Errorf("Error() = %q", se.Error())
			}
		})
	}
}

func TestUnexpectedResponse(t *testing.T) {
	srv := startFakeServer(t, helloFirst(func(r *replier, f cxdbcompat.Frame) bool {
		r.reply(f.ReqID, cxdbcompat.MsgGetBlob, cxdbcompat.GetBlobResponse{}.AppendTo(nil))
		return true
	}))
	c := dial(t, srv.addr())
	if _, err := c.GetHead(testCtx(t), 1); !errors.Is(err, ErrUnexpectedResponse) {
		t.Fatalf("err = %v, want ErrUnexpectedResponse", err)
	}
	if _, err := c.CreateContext(testCtx(t), 0); !errors.Is(err, ErrUnexpectedResponse) {
		t.Fatalf("err = %v, want ErrUnexpectedResponse", err)
	}
}

func TestMalformedResponse(t *testing.T) {
	srv := startFakeServer(t, helloFirst(func(r *replier, f cxdbcompat.Frame) bool {
		r.reply(f.ReqID, f.Type, []byte{1, 2, 3})
		return true
	}))
	c := dial(t, srv.addr())
	if _, err := c.GetLast(testCtx(t), 1, 1, true); !errors.Is(err, cxdbcompat.ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
}

// TestDeadlineLeavesConnectionUsable: a request whose context expires
// returns promptly; its late response is discarded by req_id and the next
// request gets its own answer.
func TestDeadlineLeavesConnectionUsable(t *testing.T) {
	var held atomic.Pointer[cxdbcompat.Frame]
	srv := startFakeServer(t, helloFirst(func(r *replier, f cxdbcompat.Frame) bool {
		req, _ := cxdbcompat.DecodeGetHeadRequest(f.Payload)
		if req.ContextID == 1 {
			held.Store(&f) // answered late, just before the next answer
			return true
		}
		if late := held.Load(); late != nil {
			r.reply(late.ReqID, late.Type, cxdbcompat.HeadResponse{ContextID: 1}.AppendTo(nil))
		}
		r.reply(f.ReqID, f.Type, cxdbcompat.HeadResponse{ContextID: req.ContextID}.AppendTo(nil))
		return true
	}))
	c := dial(t, srv.addr())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.GetHead(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("deadline honoured after %v", d)
	}
	h, err := c.GetHead(testCtx(t), 2)
	if err != nil || h.ContextID != 2 {
		t.Fatalf("next GetHead = %+v, %v (late response not discarded?)", h, err)
	}
}

func TestDefaultRequestTimeout(t *testing.T) {
	srv := startFakeServer(t, helloFirst(func(*replier, cxdbcompat.Frame) bool { return true }))
	c := dial(t, srv.addr(), WithRequestTimeout(50*time.Millisecond))
	if _, err := c.GetHead(context.Background(), 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
}

func TestCancelWhileWaitingForTurn(t *testing.T) {
	release := make(chan struct{})
	srv := startFakeServer(t, helloFirst(func(r *replier, f cxdbcompat.Frame) bool {
		go func() {
			<-release
			cannedReplies(r, f)
		}()
		return true
	}))
	c := dial(t, srv.addr())
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.GetHead(context.Background(), 1) }) // holds the one slot
	waitfor.Soon(t, "the server to see one request", func() bool { return len(srv.requests()) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := c.GetHead(ctx, 2)
	close(release)
	wg.Wait()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded while queued", err)
	}
	if n := len(srv.requests()); n != 1 {
		t.Errorf("queued request reached the server (%d requests)", n)
	}
}

// TestSerialByDefault: typed methods never have two requests in flight.
func TestSerialByDefault(t *testing.T) {
	var inFlight, maxInFlight atomic.Int32
	srv := startFakeServer(t, helloFirst(func(r *replier, f cxdbcompat.Frame) bool {
		n := inFlight.Add(1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		go func() {
			time.Sleep(5 * time.Millisecond)
			inFlight.Add(-1)
			cannedReplies(r, f)
		}()
		return true
	}))
	c := dial(t, srv.addr())
	runConcurrently(t, 8, func(i int) error { _, err := c.GetHead(testCtx(t), uint64(i)); return err })
	if m := maxInFlight.Load(); m != 1 {
		t.Fatalf("max requests in flight = %d, want 1", m)
	}
}

func runConcurrently(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// reverseResponder holds n requests, then answers them in reverse order.
func reverseResponder(n int) frameHandler {
	var mu sync.Mutex
	var held []cxdbcompat.Frame
	return helloFirst(func(r *replier, f cxdbcompat.Frame) bool {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, f)
		if len(held) < n {
			return true
		}
		for i := len(held) - 1; i >= 0; i-- {
			req, _ := cxdbcompat.DecodeGetHeadRequest(held[i].Payload)
			r.reply(held[i].ReqID, held[i].Type, cxdbcompat.HeadResponse{ContextID: req.ContextID, HeadTurnID: req.ContextID * 10}.AppendTo(nil))
		}
		held = nil
		return true
	})
}

func TestDoPipelinesOutOfOrder(t *testing.T) {
	const n = 6
	srv := startFakeServer(t, reverseResponder(n))
	c := dial(t, srv.addr())
	runConcurrently(t, n, func(i int) error {
		payload := cxdbcompat.GetHeadRequest{ContextID: uint64(i + 1)}.AppendTo(nil)
		typ, resp, err := c.Do(testCtx(t), cxdbcompat.MsgGetHead, 0, payload)
		if err != nil {
			return err
		}
		h, err := cxdbcompat.DecodeHeadResponse(resp)
		if err != nil || typ != cxdbcompat.MsgGetHead || h.ContextID != uint64(i+1) || h.HeadTurnID != uint64(i+1)*10 {
			return errors.New("mismatched response")
		}
		return nil
	})
}

func TestWithPipeliningTypedMethods(t *testing.T) {
	const n = 4
	srv := startFakeServer(t, reverseResponder(n)) // deadlocks unless all 4 are in flight
	c := dial(t, srv.addr(), WithPipelining())
	runConcurrently(t, n, func(i int) error {
		h, err := c.GetHead(testCtx(t), uint64(i+1))
		if err == nil && h.HeadTurnID != uint64(i+1)*10 {
			err = errors.New("mismatched response")
		}
		return err
	})
}

func TestDoReturnsErrorFramesRaw(t *testing.T) {
	srv := startFakeServer(t, newMemStore(t).handle)
	c := dial(t, srv.addr())
	typ, payload, err := c.Do(testCtx(t), 12, 0, nil)
	if err != nil || typ != cxdbcompat.MsgError {
		t.Fatalf("Do(12) = %s, %v", typ, err)
	}
	if e, err := cxdbcompat.DecodeErrorResponse(payload); err != nil || e.Code != 422 {
		t.Fatalf("error payload = %+v, %v", e, err)
	}
}

func TestConnectionDropFailsPendingAndLaterCalls(t *testing.T) {
	srv := startFakeServer(t, helloFirst(func(*replier, cxdbcompat.Frame) bool { return false }))
	c := dial(t, srv.addr())
	_, err := c.GetHead(testCtx(t), 1)
	if err == nil || errors.As(err, new(*ServerError)) {
		t.Fatalf("err = %v, want a connection error", err)
	}
	if !errors.Is(err, io.EOF) {
		t.Errorf("err = %v, want it to wrap io.EOF", err)
	}
	if _, err := c.GetHead(testCtx(t), 1); err == nil {
		t.Fatal("call after connection loss succeeded")
	}
}

func TestOversizeResponseClosesConnection(t *testing.T) {
	srv := startFakeServer(t, helloFirst(func(r *replier, f cxdbcompat.Frame) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		hdr, _ := cxdbcompat.StartFrame(nil, f.Type, 0, f.ReqID)
		hdr[0], hdr[1], hdr[2], hdr[3] = 0xff, 0xff, 0xff, 0xff
		_, _ = r.conn.Write(hdr)
		return true
	}))
	c := dial(t, srv.addr())
	if _, err := c.GetHead(testCtx(t), 1); !errors.Is(err, cxdbcompat.ErrFrameTooLarge) {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
}

func TestCloseFailsPendingRequests(t *testing.T) {
	srv := startFakeServer(t, helloFirst(func(*replier, cxdbcompat.Frame) bool { return true }))
	c := dial(t, srv.addr())
	errc := make(chan error, 1)
	go func() { _, err := c.GetHead(testCtx(t), 1); errc <- err }()
	waitfor.Soon(t, "the server to see one request", func() bool { return len(srv.requests()) == 1 })
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("pending call err = %v, want ErrClosed", err)
	}
	if _, err := c.GetHead(testCtx(t), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close err = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestAppendRequestValidation(t *testing.T) {
	srv := startFakeServer(t, helloFirst(cannedReplies))
	c := dial(t, srv.addr())
	if _, err := c.AppendTurn(testCtx(t), nil); err == nil {
		t.Error("nil request accepted")
	}
	if _, err := c.AppendTurn(testCtx(t), &AppendRequest{TypeID: "\xff"}); err == nil {
		t.Error("non-UTF-8 type id accepted")
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("invalid requests reached the server: %d", n)
	}
}

func TestTooLargeRequestKeepsConnection(t *testing.T) {
	srv := startFakeServer(t, helloFirst(cannedReplies))
	c := dial(t, srv.addr())
	_, _, err := c.Do(testCtx(t), cxdbcompat.MsgPutBlob, 0, make([]byte, cxdbcompat.MaxPayload+1))
	if !errors.Is(err, cxdbcompat.ErrFrameTooLarge) {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
	if _, err := c.GetHead(testCtx(t), 1); err != nil {
		t.Fatalf("GetHead after refused request: %v", err)
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		store := newMemStore(t)
		srv := startFakeServer(t, store.handle)
		silent := startFakeServer(t, helloFirst(func(*replier, cxdbcompat.Frame) bool { return true }))
		for range 5 {
			c, err := Dial(context.Background(), srv.addr())
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.AppendTurn(context.Background(), &AppendRequest{ContextID: 1, Payload: []byte{1}, CompressZstd: true})
			_, _ = c.GetHead(context.Background(), 1)
			_ = c.Close()

			c, err = Dial(context.Background(), silent.addr())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			_, _ = c.GetHead(ctx, 1)
			cancel()
			_ = c.Close()
		}
		srv.close()
		silent.close()
	}()
	waitfor.GoroutinesAtMost(t, before)
}

func TestDialTLS(t *testing.T) {
	srv, cfg := startFakeTLSServer(t, newMemStore(t).handle)
	c := dial(t, srv.addr(), WithTLS(cfg), WithClientTag("tls"))
	if h, err := c.CreateContext(testCtx(t), 0); err != nil || h.ContextID != 1 {
		t.Fatalf("CreateContext over TLS = %+v, %v", h, err)
	}
	if _, err := Dial(testCtx(t), srv.addr(), WithTLS(nil)); err == nil {
		t.Fatal("Dial trusted an unknown certificate")
	}
}

// TestWriteInterruptedByDeadline: a write stuck on a peer that stopped
// reading is interrupted by the context; since part of the frame went out,
// the connection is closed.
func TestWriteInterruptedByDeadline(t *testing.T) {
	stop := make(chan struct{})
	srv := startFakeServer(t, helloFirst(func(*replier, cxdbcompat.Frame) bool {
		<-stop // stop reading from the connection
		return false
	}))
	t.Cleanup(func() { close(stop) })
	c := dial(t, srv.addr(), WithPipelining())
	go func() { _, _ = c.GetHead(context.Background(), 1) }()
	waitfor.Soon(t, "the server to see one request", func() bool { return len(srv.requests()) == 1 })

	// Generous deadline: it must expire during the write, not while the
	// frame is being built (slow under -race on a loaded machine). The peer
	// never reads, so the write cannot finish on its own.
	payload := make([]byte, 16<<20) // far more than the socket buffers hold
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	_, _, err := c.Do(ctx, cxdbcompat.MsgPutBlob, 0, payload)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if _, err := c.GetHead(testCtx(t), 2); err == nil || !strings.Contains(err.Error(), "partial write") {
		t.Fatalf("call after partial write err = %v, want connection lost", err)
	}
}
