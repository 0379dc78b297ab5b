package server_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/logtest"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
	"github.com/cardboxhq/cardbox/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// ioTimeout bounds every network wait in these tests.
const ioTimeout = 10 * time.Second

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is a server on a real store (fresh Postgres database, fresh data
// directory) listening on 127.0.0.1.
type env struct {
	t      testing.TB
	pool   *pgxpool.Pool
	engine *store.Engine
	srv    *server.Server
	addr   string
	logs   *logtest.Errors
	served chan error // Serve's return value
}

// envConfig adjusts the server a test starts.
type envConfig struct {
	// wrap, if set, puts a TurnStore in front of the engine.
	wrap func(*store.Engine) store.TurnStore
	// auth is Options.Authenticate.
	auth func(e *env) server.Authenticator
	// maxInFlight is Options.MaxInFlight.
	maxInFlight int
	// allowErrorLogs keeps the cleanup from failing on ERROR-level logs.
	allowErrorLogs bool
	// allowLog, if set, excuses the ERROR-level logs it returns true for.
	allowLog func(string) bool
	// options, if set, adjusts the server's options (limits).
	options func(*server.Options)
	// listener, if set, wraps the server's listener.
	listener func(net.Listener) net.Listener
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, envConfig{})
}

func newEnvWith(t testing.TB, cfg envConfig) *env {
	t.Helper()
	e := &env{t: t, pool: pgtest.NewPool(t), logs: &logtest.Errors{}, served: make(chan error, 1)}
	engine, err := store.Open(context.Background(), store.Options{Dir: t.TempDir(), Pool: e.pool, FSTree: daemon.DecodeFSTree})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := engine.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	e.engine = engine
	var ts store.TurnStore = engine
	if cfg.wrap != nil {
		ts = cfg.wrap(engine)
	}
	opts := server.Options{Store: ts, MaxInFlight: cfg.maxInFlight, Logger: slog.New(e.logs)}
	if cfg.auth != nil {
		opts.Authenticate = cfg.auth(e)
	}
	if cfg.options != nil {
		cfg.options(&opts)
	}
	e.srv = server.New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	if cfg.listener != nil {
		ln = cfg.listener(ln)
	}
	go func() { e.served <- e.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		if err := e.srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		select {
		case err := <-e.served:
			if !errors.Is(err, server.ErrServerClosed) {
				t.Errorf("Serve returned %v, want ErrServerClosed", err)
			}
		case <-time.After(ioTimeout):
			t.Error("Serve did not return after Shutdown")
		}
		if !cfg.allowErrorLogs {
			for _, r := range e.logs.Records() {
				if cfg.allowLog == nil || !cfg.allowLog(r) {
					t.Errorf("server logged an error: %s", r)
				}
			}
		}
	})
	return e
}

// on returns the env failing t (a subtest) instead of the test that made
// it.
func (e *env) on(t testing.TB) *env {
	t.Helper()
	cp := *e
	cp.t = t
	return &cp
}

// dial connects an official-wire client (HELLO sent) closed at cleanup.
func (e *env) dial(opts ...client.Option) *client.Client {
	e.t.Helper()
	c, err := client.Dial(testCtx(e.t), e.addr, opts...)
	if err != nil {
		e.t.Fatalf("Dial: %v", err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// tenant creates (if needed) and resolves a tenant in the test database.
func (e *env) tenant(id string) ident.Tenant {
	e.t.Helper()
	return seed.StoreTenant(e.t, e.pool, e.engine, id)
}

func (e *env) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// snapshot is everything a rejected request must leave unchanged. Stats
// leaves out Groups, a work counter: a group whose only job is rejected
// still counts.
type snapshot struct {
	Turns, Contexts, Grants, Attachments, IdemKeys int
	Stats                                          store.Stats
}

func (e *env) snapshot() snapshot {
	e.t.Helper()
	st := e.engine.Stats()
	st.Groups = 0
	return snapshot{
		Turns:       e.count(`SELECT count(*) FROM turns`),
		Contexts:    e.count(`SELECT count(*) FROM contexts`),
		Grants:      e.count(`SELECT count(*) FROM tenant_blobs`),
		Attachments: e.count(`SELECT count(*) FROM fs_attachments`),
		IdemKeys:    e.count(`SELECT count(*) FROM idempotency_keys`),
		Stats:       st,
	}
}

func (e *env) requireUnchanged(before snapshot, what string) {
	e.t.Helper()
	if after := e.snapshot(); !reflect.DeepEqual(after, before) {
		e.t.Fatalf("%s changed the store:\nbefore %+v\nafter  %+v", what, before, after)
	}
}

// requireServing checks that a fresh connection gets HELLO and CTX_CREATE
// answered.
func (e *env) requireServing() {
	e.t.Helper()
	c := dialRaw(e.t, e.addr)
	defer c.close()
	hello := c.expectOK(cxdbcompat.MsgHello, 0, cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientTag: "probe"}.AppendTo(nil))
	if len(hello) != 10 {
		e.t.Fatalf("HELLO response is %d bytes", len(hello))
	}
	c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0))
}

// rawConn speaks frames directly, for what the client cannot send. Its
// methods fail t; on gives a view of the same connection that fails a
// subtest instead.
type rawConn struct {
	t testing.TB
	*connState
}

type connState struct {
	conn  net.Conn
	r     *bufio.Reader
	reqID uint64
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &rawConn{t: t, connState: &connState{conn: conn, r: bufio.NewReader(conn), reqID: 1000}}
}

func (c *rawConn) on(t testing.TB) *rawConn {
	t.Helper()
	return &rawConn{t: t, connState: c.connState}
}

func (c *rawConn) close() { _ = c.conn.Close() }

// write sends bytes as they are.
func (c *rawConn) write(b []byte) {
	c.t.Helper()
	_ = c.conn.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *rawConn) send(typ cxdbcompat.MsgType, flags uint16, reqID uint64, payload []byte) {
	c.t.Helper()
	c.write(cxdbcompat.AppendFrame(nil, typ, flags, reqID, payload))
}

func (c *rawConn) read() (cxdbcompat.Frame, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(ioTimeout))
	return cxdbcompat.ReadFrame(c.r, nil)
}

func (c *rawConn) mustRead() cxdbcompat.Frame {
	c.t.Helper()
	f, err := c.read()
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	if f.Flags != 0 {
		c.t.Errorf("response %s req %d has flags %d, want 0", f.Type, f.ReqID, f.Flags)
	}
	return f
}

// call sends one request and returns its response, checking req_id.
func (c *rawConn) call(typ cxdbcompat.MsgType, flags uint16, payload []byte) cxdbcompat.Frame {
	c.t.Helper()
	c.reqID += 7
	c.send(typ, flags, c.reqID, payload)
	f := c.mustRead()
	if f.ReqID != c.reqID {
		c.t.Fatalf("%s: response req_id %d, want %d", typ, f.ReqID, c.reqID)
	}
	return f
}

// expectOK calls and requires a response of the request's own type.
func (c *rawConn) expectOK(typ cxdbcompat.MsgType, flags uint16, payload []byte) []byte {
	c.t.Helper()
	f := c.call(typ, flags, payload)
	if f.Type != typ {
		c.t.Fatalf("%s: got %s %s, want success", typ, f.Type, describe(f))
	}
	return f.Payload
}

// expectError calls and requires an ERROR frame with code.
func (c *rawConn) expectError(typ cxdbcompat.MsgType, flags uint16, payload []byte, code uint32) cxdbcompat.ErrorResponse {
	c.t.Helper()
	return requireError(c.t, c.call(typ, flags, payload), code)
}

// expectClosed requires the server to end the connection without sending
// anything more.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	f, err := c.read()
	if err == nil {
		c.t.Fatalf("connection still open: got %s %s", f.Type, describe(f))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection not closed within %v", ioTimeout)
	}
}

// requireError checks that f is an ERROR frame with code and a JSON detail
// {"code":KIND,"message":…} that decodes consistently.
func requireError(t testing.TB, f cxdbcompat.Frame, code uint32) cxdbcompat.ErrorResponse {
	t.Helper()
	if f.Type != cxdbcompat.MsgError {
		t.Fatalf("got %s (%d bytes), want ERROR %d", f.Type, len(f.Payload), code)
	}
	e, err := cxdbcompat.DecodeErrorResponse(f.Payload)
	if err != nil {
		t.Fatalf("decode ERROR payload %x: %v", f.Payload, err)
	}
	if e.Code != code {
		t.Fatalf("ERROR code %d (%s: %s), want %d", e.Code, e.Kind, e.Message, code)
	}
	detailLen := binary.LittleEndian.Uint32(f.Payload[4:8])
	if int(detailLen) != len(f.Payload)-8 {
		t.Fatalf("detail length %d, payload has %d bytes after the header", detailLen, len(f.Payload)-8)
	}
	var detail struct {
		Code    *string `json:"code"`
		Message *string `json:"message"`
	}
	if err := json.Unmarshal(f.Payload[8:], &detail); err != nil {
		t.Fatalf("ERROR detail is not JSON: %q: %v", f.Payload[8:], err)
	}
	if detail.Code == nil || *detail.Code == "" || detail.Message == nil || *detail.Message == "" {
		t.Fatalf("ERROR detail lacks code or message: %s", f.Payload[8:])
	}
	if e.Kind != *detail.Code || e.Message != *detail.Message {
		t.Fatalf("decoded %+v, detail %s", e, f.Payload[8:])
	}
	return e
}

func describe(f cxdbcompat.Frame) string {
	if f.Type == cxdbcompat.MsgError {
		if e, err := cxdbcompat.DecodeErrorResponse(f.Payload); err == nil {
			return fmt.Sprintf("code %d %s: %s", e.Code, e.Kind, e.Message)
		}
	}
	return hex.EncodeToString(f.Payload[:min(len(f.Payload), 256)])
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func hashOf(b []byte) cxdbcompat.Hash { return blake3.Sum256(b) }

// appendReq is a valid uncompressed APPEND_TURN request.
func appendReq(ctxID, parent uint64, payload []byte) cxdbcompat.AppendTurnRequest {
	return cxdbcompat.AppendTurnRequest{
		ContextID: ctxID, ParentTurnID: parent,
		DeclaredTypeID: "cxdb.ConversationItem", DeclaredTypeVersion: 3,
		Encoding: cxdbcompat.EncodingMsgpack, Compression: cxdbcompat.CompressionNone,
		UncompressedLen: uint32(len(payload)), ContentHash: hashOf(payload),
		Payload: payload, IdempotencyKey: []byte{},
	}
}

// fixture is one protocol fixture of the codec package.
type fixture struct {
	Name       string             `json:"name"`
	MsgType    cxdbcompat.MsgType `json:"msg_type"`
	Flags      uint16             `json:"flags"`
	PayloadHex string             `json:"payload_hex"`
	Payload    []byte             `json:"-"`
}

func loadFixtures(t testing.TB) map[string]fixture {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "fixtures", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	out := map[string]fixture{}
	sort.Strings(paths)
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f fixture
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if f.Payload, err = hex.DecodeString(f.PayloadHex); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[f.Name] = f
	}
	return out
}

// gate is a TurnStore in front of the engine whose Append waits until the
// gate opens, so a test can hold appends in flight.
type gate struct {
	*store.Engine
	entered chan struct{} // one send per Append that reached the gate
	open    chan struct{}
	once    sync.Once
}

func newGate(e *store.Engine) *gate {
	return &gate{Engine: e, entered: make(chan struct{}, 1024), open: make(chan struct{})}
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func (g *gate) Append(ctx context.Context, t ident.Tenant, req *store.AppendRequest) (store.AppendResult, error) {
	g.entered <- struct{}{}
	select {
	case <-g.open:
	case <-ctx.Done():
		return store.AppendResult{}, ctx.Err()
	}
	return g.Engine.Append(ctx, t, req)
}

// waitEntered waits until n appends are held by the gate.
func (g *gate) waitEntered(t testing.TB, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-g.entered:
		case <-time.After(ioTimeout):
			t.Fatalf("only %d of %d appends reached the store", i, n)
		}
	}
}
