package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testbin"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// serverBinary is cardboxd, built once per test binary.
func serverBinary(t testing.TB) string {
	t.Helper()
	return testbin.Command(t, "./cmd/cardboxd")
}

// serverProc is a real cardboxd process.
type serverProc struct {
	t        *testing.T
	cmd      *exec.Cmd
	env      []string
	binAddr  string
	httpAddr string
	log      *testbin.Output
	// clientTLS, when set, is how clients reach a server started with TLS.
	clientTLS *tls.Config
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer runs cardboxd on dataDir; databaseURL "" means embedded.
func startServer(t *testing.T, dataDir, databaseURL string) *serverProc {
	t.Helper()
	p := newServer(t, dataDir, databaseURL)
	p.start()
	return p
}

// newServer is a cardboxd configured but not started: a test may add to
// its environment first.
func newServer(t *testing.T, dataDir, databaseURL string) *serverProc {
	t.Helper()
	p := &serverProc{t: t, binAddr: freePort(t), httpAddr: freePort(t), log: &testbin.Output{}}
	p.env = append(os.Environ(),
		"CARDBOX_DATA_DIR="+dataDir, "CARDBOX_DATABASE_URL="+databaseURL,
		"CARDBOX_BINARY_ADDR="+p.binAddr, "CARDBOX_HTTP_ADDR="+p.httpAddr, "CARDBOX_LOG_LEVEL=warn")
	return p
}

// httpURL is path on the server's HTTP listener, https with TLS.
func (p *serverProc) httpURL(path string) string {
	if p.clientTLS != nil {
		return "https://" + p.httpAddr + path
	}
	return "http://" + p.httpAddr + path
}

// httpClient reaches the HTTP listener (trusting the test CA with TLS).
func (p *serverProc) httpClient() *http.Client {
	if p.clientTLS == nil {
		return http.DefaultClient
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = p.clientTLS
	p.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func (p *serverProc) start() {
	p.t.Helper()
	p.cmd = exec.Command(serverBinary(p.t))
	p.cmd.Env = p.env
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	cmd := p.cmd
	p.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
	})
	p.waitHealthy()
}

func (p *serverProc) waitHealthy() {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	hc := p.httpClient()
	for time.Now().Before(deadline) {
		resp, err := hc.Get(p.httpURL("/healthz"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("cardboxd not healthy after 60s:\n%s", p.log)
}

// kill sends SIGKILL and checks that it is what ended the process.
func (p *serverProc) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		p.t.Fatal(err)
	}
	_ = p.cmd.Wait()
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		p.t.Fatalf("cardboxd was not killed by SIGKILL: %v\n%s", p.cmd.ProcessState, p.log)
	}
}

func (p *serverProc) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	return p.cmd.Wait()
}

func (p *serverProc) dial(t *testing.T) *client.Client {
	t.Helper()
	var opts []client.Option
	if p.clientTLS != nil {
		opts = append(opts, client.WithTLS(p.clientTLS))
	}
	c, err := client.Dial(context.Background(), p.binAddr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// acked is an acknowledged append.
type acked struct {
	contextID uint64
	turnID    uint64
	depth     uint32
	payload   []byte
}

// TestKill9UnderLoadLosesNoAcknowledgedTurn kills a real server process
// while writers append, restarts it, and checks that every acknowledged
// turn reads back with the same id, depth and payload, and that retrying
// the unacknowledged appends with their idempotency keys duplicates
// nothing.
func TestKill9UnderLoadLosesNoAcknowledgedTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real server processes")
	}
	dataDir, url := t.TempDir(), pgtest.NewDB(t)
	srv := startServer(t, dataDir, url)
	setup := srv.dial(t)
	var contexts []uint64
	for range 8 {
		h, err := setup.CreateContext(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		contexts = append(contexts, h.ContextID)
	}
	var all []acked
	for round := range 3 {
		got, pending := loadUntilKilled(t, srv, contexts, round)
		all = append(all, got...)
		srv.start()
		checkAcked(t, srv, contexts, all)
		all = append(all, retryPending(t, srv, pending)...)
		t.Logf("round %d: %d acknowledged so far, %d in flight at the kill", round, len(all), len(pending))
	}
	if err := srv.stop(); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, srv.log)
	}
}

// loadUntilKilled runs 16 writers and kill -9s the server after a while.
// It returns the acknowledged appends and the ones in flight at the kill.
func loadUntilKilled(t *testing.T, srv *serverProc, contexts []uint64, round int) (done []acked, pending []*client.AppendRequest) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 16 {
		c := srv.dial(t)
		wg.Go(func() {
			for i := 0; ; i++ {
				req := &client.AppendRequest{
					ContextID: contexts[(w+i)%len(contexts)], TypeID: "test.Turn", TypeVersion: 1,
					Payload:        []byte(fmt.Sprintf("round %d writer %d turn %d %s", round, w, i, bytes.Repeat([]byte("p"), i%512))),
					IdempotencyKey: fmt.Sprintf("r%d-w%d-%d", round, w, i),
				}
				res, err := c.AppendTurn(context.Background(), req)
				mu.Lock()
				if err != nil {
					pending = append(pending, req)
					mu.Unlock()
					return
				}
				done = append(done, acked{contextID: res.ContextID, turnID: res.NewTurnID, depth: res.NewDepth, payload: req.Payload})
				mu.Unlock()
			}
		})
	}
	// Kill once the writers are in full swing.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(done)
		mu.Unlock()
		if n >= 2000 || time.Now().After(deadline) {
			break
		}
	}
	srv.kill()
	wg.Wait()
	if len(done) == 0 {
		t.Fatalf("no append was acknowledged before the kill:\n%s", srv.log)
	}
	return done, pending
}

// checkAcked reads every context back and finds every acknowledged turn.
func checkAcked(t *testing.T, srv *serverProc, contexts []uint64, all []acked) {
	t.Helper()
	c := srv.dial(t)
	stored := map[uint64]client.TurnRecord{}
	for _, id := range contexts {
		turns, err := c.GetLast(context.Background(), id, 1_000_000, true)
		if err != nil {
			t.Fatalf("get last %d after restart: %v", id, err)
		}
		for i, tr := range turns {
			if tr.Depth != uint32(i+1) {
				t.Fatalf("context %d: turn %d at position %d has depth %d", id, tr.TurnID, i, tr.Depth)
			}
			stored[tr.TurnID] = tr
		}
	}
	for _, a := range all {
		tr, ok := stored[a.turnID]
		if !ok {
			t.Fatalf("acknowledged turn %d (context %d) lost after kill -9", a.turnID, a.contextID)
		}
		if tr.Depth != a.depth || !bytes.Equal(tr.Payload, a.payload) {
			t.Fatalf("turn %d changed: depth %d payload %q, acknowledged depth %d payload %q", a.turnID, tr.Depth, tr.Payload, a.depth, a.payload)
		}
	}
}

// retryPending re-sends the appends cut off by the kill; each must land
// exactly once (the idempotency key finds a turn that did commit).
func retryPending(t *testing.T, srv *serverProc, pending []*client.AppendRequest) []acked {
	t.Helper()
	c := srv.dial(t)
	var out []acked
	for _, req := range pending {
		first, err := c.AppendTurn(context.Background(), req)
		if err != nil {
			t.Fatalf("retry %s: %v", req.IdempotencyKey, err)
		}
		again, err := c.AppendTurn(context.Background(), req)
		if err != nil || again.NewTurnID != first.NewTurnID {
			t.Fatalf("retry %s twice: turns %d and %d (%v)", req.IdempotencyKey, first.NewTurnID, again.NewTurnID, err)
		}
		out = append(out, acked{contextID: first.ContextID, turnID: first.NewTurnID, depth: first.NewDepth, payload: req.Payload})
	}
	return out
}

// TestEmbeddedPostgresLifecycle starts cardboxd with no database URL: it
// initialises a cluster in the data directory, serves, stops it on SIGTERM,
// and reuses it on the next start.
func TestEmbeddedPostgresLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real server processes")
	}
	// Not t.TempDir: its parent is private, and postgres may run as another
	// user (when the tests run as root).
	dataDir, err := os.MkdirTemp("", "cardboxd-embedded-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	os.Chmod(dataDir, 0o755)
	srv := startServer(t, dataDir, "")
	c := srv.dial(t)
	h, err := c.CreateContext(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.AppendTurn(context.Background(), &client.AppendRequest{ContextID: h.ContextID, TypeID: "t", Payload: []byte("kept")})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := srv.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, srv.log)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postgres", "pgdata", "postmaster.pid")); !os.IsNotExist(err) {
		t.Fatalf("embedded postgres still running after shutdown (postmaster.pid: %v)", err)
	}
	srv.start()
	turns, err := srv.dial(t).GetLast(context.Background(), h.ContextID, 10, true)
	if err != nil || len(turns) != 1 || turns[0].TurnID != res.NewTurnID || string(turns[0].Payload) != "kept" {
		t.Fatalf("after restart: %+v %v", turns, err)
	}
	checkCardBoxRoutes(t, srv)
}

// checkCardBoxRoutes writes a card and a box over the server's REST API and
// reads them back.
func checkCardBoxRoutes(t *testing.T, srv *serverProc) {
	t.Helper()
	base := "http://" + srv.httpAddr + "/projects/demo"
	post := func(path, body string, want int) string {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	post("/cards", `{"card_id":"c1","content":"hello","metadata":{"type":"task.instruction","role":"user"}}`, http.StatusCreated)
	req, _ := http.NewRequest(http.MethodPut, base+"/boxes/b1", strings.NewReader(`{"card_ids":["c1"]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := post("/cards/batch", `{"card_ids":["c1","nope"]}`, http.StatusOK)
	if !strings.Contains(got, `"hello"`) || !strings.Contains(got, `"missing_ids":["nope"]`) {
		t.Fatalf("cards/batch = %s", got)
	}
}
