package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/pgfreeze"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// TestStoppedPostgresIsAnswered503InTimeAndLosesNothing runs a real
// cardboxd on its own embedded Postgres with --pg-timeout 2s, has 64
// writers append with idempotency keys, and stops the cluster (SIGSTOP of
// the postmaster and every backend, as a stalled disk or a paused VM
// would) for 6 s. Every append answers within the bound plus a margin, the
// ones Postgres did not finish with ERROR 503; /healthz answers 503
// within 2 s; after SIGCONT the server is healthy again by itself, every
// acknowledged turn reads back, each refused append retried with its key
// gives exactly one turn (the ones whose COMMIT Postgres took once it went
// on included), and new appends succeed.
func TestStoppedPostgresIsAnswered503InTimeAndLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real server process and its Postgres")
	}
	const (
		bound   = 2 * time.Second
		margin  = 1500 * time.Millisecond
		writers = 64
		stopped = 6 * time.Second
	)
	// Not t.TempDir: postgres may run as another user (see
	// TestEmbeddedPostgresLifecycle).
	dataDir, err := os.MkdirTemp("", "cardboxd-frozen-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	os.Chmod(dataDir, 0o755)
	srv := newServer(t, dataDir, "")
	srv.env = append(srv.env, "CARDBOX_PG_TIMEOUT="+bound.String())
	srv.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cardboxd's log:\n%s", srv.log)
		}
	})

	setup := srv.dial(t)
	var contexts []uint64
	for range 8 {
		h, err := setup.CreateContext(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		contexts = append(contexts, h.ContextID)
	}

	// Each writer appends until an append fails, then stops.
	var mu sync.Mutex
	var done []acked
	var refused []*client.AppendRequest
	var slow []string
	var wrong []error
	var wg sync.WaitGroup
	for w := range writers {
		c := srv.dial(t)
		wg.Go(func() {
			for i := 0; ; i++ {
				req := &client.AppendRequest{
					ContextID: contexts[(w+i)%len(contexts)], TypeID: "test.Turn", TypeVersion: 1,
					Payload:        fmt.Appendf(nil, "writer %d turn %d", w, i),
					IdempotencyKey: fmt.Sprintf("w%d-%d", w, i),
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				start := time.Now()
				res, err := c.AppendTurn(ctx, req)
				took := time.Since(start)
				cancel()
				mu.Lock()
				if took > bound+margin {
					slow = append(slow, fmt.Sprintf("%s took %v (%v)", req.IdempotencyKey, took, err))
				}
				if err != nil {
					var se *client.ServerError
					if !errors.As(err, &se) || se.Code != 503 {
						wrong = append(wrong, fmt.Errorf("%s: %w", req.IdempotencyKey, err))
					}
					refused = append(refused, req)
					mu.Unlock()
					return
				}
				done = append(done, acked{contextID: res.ContextID, turnID: res.NewTurnID, depth: res.NewDepth, payload: req.Payload})
				mu.Unlock()
			}
		})
	}
	waitfor.True(t, "writers in full swing", 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) >= 1000 || len(refused) > 0
	})
	mu.Lock()
	early := len(refused)
	mu.Unlock()
	if early > 0 {
		t.Fatalf("%d appends refused before Postgres was stopped: %v", early, wrong)
	}

	frozen := pgfreeze.Freeze(t, filepath.Join(dataDir, "postgres", "pgdata"))
	frozenAt := time.Now()
	t.Logf("stopped %d Postgres processes", frozen.Processes())
	checkHealth503(t, srv)
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()
	select {
	case <-writersDone:
	case <-time.After(bound + margin + 5*time.Second):
		t.Fatalf("writers not answered %v after Postgres stopped", time.Since(frozenAt))
	}
	// A new connection's append, long after the bound, is refused in time
	// too, and health still answers.
	late := srv.dial(t)
	lateReq := &client.AppendRequest{ContextID: contexts[0], TypeID: "test.Turn", TypeVersion: 1,
		Payload: []byte("while stopped"), IdempotencyKey: "late"}
	start := time.Now()
	_, err = late.AppendTurn(context.Background(), lateReq)
	var se *client.ServerError
	if took := time.Since(start); !errors.As(err, &se) || se.Code != 503 || took > bound+margin {
		t.Errorf("append on a new connection with Postgres stopped: %v after %v; want ERROR 503 within %v", err, took, bound+margin)
	}
	refused = append(refused, lateReq)
	checkHealth503(t, srv)
	for _, s := range slow {
		t.Errorf("append not answered within %v: %s", bound+margin, s)
	}
	for _, err := range wrong {
		t.Errorf("append refused with other than ERROR 503: %v", err)
	}
	if t.Failed() {
		t.FailNow()
	}
	// The stop lasts stopped in all, well past the bound (this waits out
	// the fault; it synchronises with nothing).
	<-time.After(time.Until(frozenAt.Add(stopped)))

	frozen.Thaw()
	waitfor.True(t, "/healthz 200 after SIGCONT", 30*time.Second, func() bool {
		resp, err := http.Get(srv.httpURL("/healthz"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	checkAcked(t, srv, contexts, done)
	all := append(done, retryPending(t, srv, refused)...)
	res, err := srv.dial(t).AppendTurn(context.Background(), &client.AppendRequest{
		ContextID: contexts[1], TypeID: "test.Turn", TypeVersion: 1, Payload: []byte("after SIGCONT")})
	if err != nil {
		t.Fatalf("append after SIGCONT: %v", err)
	}
	all = append(all, acked{contextID: res.ContextID, turnID: res.NewTurnID, depth: res.NewDepth, payload: []byte("after SIGCONT")})
	checkAcked(t, srv, contexts, all)
	// Exactly the acknowledged turns, one per append: a refused append
	// that committed anyway was found by its retry, not appended again.
	c := srv.dial(t)
	var stored int
	for _, id := range contexts {
		turns, err := c.GetLast(context.Background(), id, 1_000_000, false)
		if err != nil {
			t.Fatal(err)
		}
		stored += len(turns)
	}
	if stored != len(all) {
		t.Fatalf("%d turns stored, %d appends acknowledged (%d before the stop, %d refused and retried)", stored, len(all), len(done), len(refused))
	}
	t.Logf("%d acknowledged before the stop, %d refused and retried; groups not confirmed in time: %d committed, %d did not",
		len(done), len(refused), strings.Count(srv.log.String(), "did commit;"), strings.Count(srv.log.String(), "did not commit"))
	if err := srv.stop(); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, srv.log)
	}
}

// checkHealth503 asks /healthz, which must answer 503 within 2 s.
func checkHealth503(t *testing.T, srv *serverProc) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	resp, err := hc.Get(srv.httpURL("/healthz"))
	took := time.Since(start)
	if err != nil {
		t.Errorf("/healthz with Postgres stopped: %v after %v", err, took)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || took > 2*time.Second {
		t.Errorf("/healthz with Postgres stopped: %d after %v; want 503 within 2s", resp.StatusCode, took)
	}
}
