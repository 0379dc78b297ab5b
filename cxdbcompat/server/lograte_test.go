package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/internal/logtest"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/store"
)

// Postgres gone makes 10,000 requests fail: ERROR 503 each, counted each
// in cardbox_binary_requests_total, and logged as the first failure and
// one count, not 10,000 lines.
func TestRepeatedFailuresAreCountedNotEachLogged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	engine, err := store.Open(ctx, store.Options{Dir: t.TempDir(), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	logs := &logtest.Errors{}
	srv := server.New(server.Options{Store: engine, Logger: slog.New(logs), ErrorLogInterval: time.Hour})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			<-served
		})
	}
	t.Cleanup(shutdown)

	c := dialRaw(t, ln.Addr().String())
	c.expectOK(cxdbcompat.MsgHello, 0, cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientTag: "t"}.AppendTo(nil))
	// Each request fails at once: the pool is closed (cutting its
	// connections would cost each request a connection attempt).
	pool.Close()
	const n = 10_000
	sent := make(chan error, 1)
	go func() {
		var frames []byte
		for i := range n {
			frames = cxdbcompat.AppendFrame(frames, cxdbcompat.MsgCtxCreate, 0, uint64(i+1), u64(0))
		}
		_ = c.conn.SetWriteDeadline(time.Now().Add(time.Minute))
		_, err := c.conn.Write(frames)
		sent <- err
	}()
	for range n {
		f, err := c.read()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		requireError(t, f, 503)
	}
	if err := <-sent; err != nil {
		t.Fatalf("write: %v", err)
	}
	shutdown() // logs the count not logged yet

	recs := logs.Records()
	if len(recs) != 2 {
		t.Fatalf("%d records at ERROR for %d failed requests, want the first and one count: %q", len(recs), n, recs)
	}
	if !strings.HasPrefix(recs[1], "binary request failed: 503 UNAVAILABLE ×9,999 in the last ") {
		t.Fatalf("the count: %q", recs[1])
	}
	if got := repeated(t, recs[1]) + 1; got != n {
		t.Fatalf("the records stand for %d failed requests, want %d", got, n)
	}
	want := fmt.Sprintf(`
# HELP cardbox_binary_requests_total Binary protocol requests answered, by message type and code (0: success, else the ERROR code).
# TYPE cardbox_binary_requests_total counter
cardbox_binary_requests_total{code="0",type="HELLO"} 1
cardbox_binary_requests_total{code="503",type="CTX_CREATE"} %d
`, n)
	if err := testutil.CollectAndCompare(srv.Collector(), strings.NewReader(want), "cardbox_binary_requests_total"); err != nil {
		t.Fatal(err)
	}
}

func repeated(t *testing.T, rec string) int {
	t.Helper()
	m := regexp.MustCompile(` repeated=(\d+)`).FindStringSubmatch(rec)
	if m == nil {
		t.Fatalf("no count in %q", rec)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
