package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/sdk"
	"github.com/cardboxhq/cardbox/sdk/internal/cardboxd"
)

// proxy forwards TCP connections to a server and can cut them all.
type proxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	conns    map[net.Conn]bool
	wg       sync.WaitGroup
	cuts     atomic.Int64
}

func startProxy(t *testing.T, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, u)
		go p.pipe(u, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut closes every connection: requests in flight are lost, some after
// the server committed them.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	p.cuts.Add(1)
}

// load appends perWriter turns to each of writers contexts, the key of
// each derived from its writer and index, and reports how many were
// acknowledged so far through done.
func load(ctx context.Context, c *sdk.Client, contexts []sdk.ContextID, perWriter int, done *atomic.Int64) error {
	errs := make(chan error, len(contexts))
	for w, id := range contexts {
		go func() {
			for i := range perWriter {
				_, err := c.AppendTurn(ctx, sdk.AppendRequest{
					ContextID: id, TypeID: "test.Event", TypeVersion: 1,
					Payload:        fmt.Appendf(nil, "w%d-%d", w, i),
					IdempotencyKey: sdk.AgentKey(fmt.Sprintf("writer-%d", w), uint64(i), "event"),
				})
				if err != nil {
					errs <- fmt.Errorf("writer %d turn %d: %w", w, i, err)
					return
				}
				done.Add(1)
			}
			errs <- nil
		}()
	}
	var all []error
	for range contexts {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// checkChains reads every context back: exactly perWriter turns, in
// order, each once.
func checkChains(t *testing.T, c *sdk.Client, contexts []sdk.ContextID, perWriter int) {
	t.Helper()
	for w, id := range contexts {
		turns, err := c.Last(context.Background(), id, perWriter+10, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(turns) != perWriter {
			t.Errorf("context %s holds %d turns, want %d (duplicates or losses)", id, len(turns), perWriter)
			continue
		}
		for i, turn := range turns {
			if want := fmt.Sprintf("w%d-%d", w, i); string(turn.Payload) != want || turn.Depth != uint32(i+1) {
				t.Fatalf("context %s turn %d: %q at depth %d, want %q at %d", id, i, turn.Payload, turn.Depth, want, i+1)
			}
		}
	}
}

func makeContexts(t *testing.T, c *sdk.Client, n int) []sdk.ContextID {
	t.Helper()
	var ids []sdk.ContextID
	for range n {
		h, err := c.CreateContext(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.ContextID)
	}
	return ids
}

// TestConnectionsCutUnderLoad cuts every connection between client and
// server again and again while 8 writers append: no turn is lost and
// none is written twice.
func TestConnectionsCutUnderLoad(t *testing.T) {
	srv := cardboxd.Start(t)
	p := startProxy(t, srv.BinAddr)
	c := client(t, srv, sdk.Config{Conns: 3, MaxAttempts: 50, RetryBase: 5 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	cut := sdk.NewClient(sdk.Config{BinaryAddr: p.ln.Addr().String(), HTTPURL: srv.HTTPURL, Conns: 3,
		MaxAttempts: 50, RetryBase: 5 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	t.Cleanup(func() { cut.Close() })
	const writers, perWriter = 8, 150
	contexts := makeContexts(t, c, writers)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var done atomic.Int64
	result := make(chan error, 1)
	start := time.Now()
	go func() { result <- load(ctx, cut, contexts, perWriter, &done) }()
	var err error
	for loop := true; loop; {
		select {
		case err = <-result:
			loop = false
		case <-time.After(20 * time.Millisecond): // the cadence of the cuts
			p.cut()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	t.Logf("%d appends in %v (%.0f/s) through %d cuts of every connection", done.Load(), elapsed.Round(time.Millisecond), float64(done.Load())/elapsed.Seconds(), p.cuts.Load())
	checkChains(t, c, contexts, perWriter)
}

// TestServerKilledUnderLoad SIGKILLs cardboxd while writers append
// (answers of committed appends are lost with it), restarts it, and
// checks that the writers finished with no turn lost and none twice.
func TestServerKilledUnderLoad(t *testing.T) {
	srv := cardboxd.Start(t)
	cfg := sdk.Config{Conns: 2, MaxAttempts: 1000, RetryBase: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond, RequestTimeout: 10 * time.Second}
	c := client(t, srv, cfg)
	const writers, perWriter = 6, 200
	contexts := makeContexts(t, c, writers)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var done atomic.Int64
	result := make(chan error, 1)
	go func() { result <- load(ctx, c, contexts, perWriter, &done) }()
	for done.Load() < writers*perWriter/3 {
		select {
		case err := <-result:
			t.Fatalf("load ended before the kill: %v", err)
		case <-time.After(5 * time.Millisecond): // polling progress
		}
	}
	atKill := done.Load()
	srv.Kill()
	srv.Restart()
	if err := <-result; err != nil {
		t.Fatalf("%v\nserver log:\n%s", err, srv.Log())
	}
	t.Logf("killed after %d of %d appends; all finished after the restart", atKill, writers*perWriter)
	checkChains(t, c, contexts, perWriter)
}
