package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/cardboxhttp"
	"github.com/cardboxhq/cardbox/api/cxdbhttp"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/metastore"
)

// levelLog is a slog.Handler that keeps every record with its level.
type levelLog struct {
	mu   sync.Mutex
	recs []levelRecord
}

type levelRecord struct {
	level slog.Level
	text  string // message and attributes
}

func (l *levelLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *levelLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *levelLog) WithGroup(string) slog.Handler            { return l }

func (l *levelLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, levelRecord{r.Level, b.String()})
	return nil
}

// at returns the records at level that contain every one of parts.
func (l *levelLog) at(level slog.Level, parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, r := range l.recs {
		if r.level != level {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(r.text, p) {
				continue next
			}
		}
		out = append(out, r.text)
	}
	return out
}

// enteredHealth is the store's health check, which tells the test when
// a check begins.
type enteredHealth struct {
	*store.Engine
	entered chan struct{}
}

func (h enteredHealth) Healthy(ctx context.Context) error {
	h.entered <- struct{}{}
	return h.Engine.Healthy(ctx)
}

// goneEnv is cardbox's HTTP API as cardboxd wires it (health, CardBox,
// CXDB, request metrics, access log) on a fresh database, behind a real
// listener.
type goneEnv struct {
	url     string
	pool    *pgxpool.Pool
	engine  *store.Engine
	cards   *cardbox.Service
	metrics *api.HTTPMetrics
	logs    *levelLog
	entered chan struct{}
}

func newGoneEnv(t *testing.T) *goneEnv {
	t.Helper()
	e := &goneEnv{pool: pgtest.NewPool(t), logs: &levelLog{}, entered: make(chan struct{}, 16), metrics: api.NewHTTPMetrics()}
	engine, err := store.Open(context.Background(), store.Options{Dir: t.TempDir(), Pool: e.pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	e.engine = engine
	svc := service.New(engine, metastore.New(e.pool, 0, engine), service.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("service: %v", err)
		}
	})
	e.cards = cardbox.New(e.pool, cardbox.Options{})
	reg := api.NewRegistry(nil, e.metrics)
	h := api.New(api.Options{
		Health: enteredHealth{engine, e.entered},
		Routes: []api.Routes{
			cardboxhttp.New(e.cards),
			cxdbhttp.New(svc, cxdbhttp.Options{Stop: ctx.Done(), Stats: engine, Gatherer: reg}),
		},
		HTTPMetrics: e.metrics, Metrics: reg, AccessLog: true, Logger: slog.New(e.logs),
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(cancel)
	e.url = srv.URL
	return e
}

// starveConnections takes every connection of the pool, as a Postgres
// that stopped answering would hold them; it returns how to give them
// back.
func (e *goneEnv) starveConnections(t *testing.T) (release func()) {
	t.Helper()
	var conns []*pgxpool.Conn
	for range e.pool.Config().MaxConns {
		c, err := e.pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			for _, c := range conns {
				c.Release()
			}
		})
	}
	t.Cleanup(release)
	return release
}

// readyThenStarve has the health check answer ok once (the server is
// ready: a 503 from then on is a fault, not start-up), then starves the
// pool (starveConnections).
func (e *goneEnv) readyThenStarve(t *testing.T) (release func()) {
	t.Helper()
	res, err := http.Get(e.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", res.StatusCode)
	}
	<-e.entered
	return e.starveConnections(t)
}

// lockTable holds table in ACCESS EXCLUSIVE mode until release (or the
// end of the test).
func (e *goneEnv) lockTable(t *testing.T, table string) (release func()) {
	t.Helper()
	tx, err := e.pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback(context.Background()) }) }
	t.Cleanup(release)
	if _, err := tx.Exec(context.Background(), "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	return release
}

// requestsWith is the request count of the route with a status of the
// given class ("4", "5") or exact status.
func (e *goneEnv) requestsWith(route, status string) float64 {
	var n float64
	for _, s := range []string{"200", "404", "499", "500", "503"} {
		if strings.HasPrefix(s, status) {
			n += testutil.ToFloat64(e.metrics.Requests(http.MethodGet, route, s))
		}
	}
	return n
}

// v1Errors is errors.total of GET /v1/metrics.
func (e *goneEnv) v1Errors(t *testing.T) float64 {
	t.Helper()
	res, err := http.Get(e.url + "/v1/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m struct {
		Errors struct {
			Total float64 `json:"total"`
		} `json:"errors"`
	}
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("/v1/metrics: %d, %v", res.StatusCode, err)
	}
	return m.Errors.Total
}

// TestClientThatGoesAwayIsNotAnError: a request whose client disconnects
// while the server waits on Postgres is status 499, logged at info as
// client-closed, counted as 499 and not as an error, on every route; a
// deadline of the server's own stays a logged 503.
func TestClientThatGoesAwayIsNotAnError(t *testing.T) {
	cases := []struct {
		name, path, route string
		// block makes the route wait on Postgres; waiting waits until a
		// request does. release ends the wait.
		block   func(t *testing.T, e *goneEnv) (release func())
		waiting func(t *testing.T, e *goneEnv, done <-chan error)
		// leave: the client cancels its request while it waits; else the
		// server's own deadline ends it.
		leave bool
	}{
		{
			name: "health check, Postgres out of connections", path: "/healthz", route: "/healthz", leave: true,
			block:   func(t *testing.T, e *goneEnv) func() { t.Helper(); return e.starveConnections(t) },
			waiting: healthEntered,
		},
		{
			name: "card read, table locked", path: "/projects/p1/cards/c1", route: "/projects/:project_id/cards/:card_id", leave: true,
			block: func(t *testing.T, e *goneEnv) func() {
				t.Helper()
				if _, err := e.cards.AddCards(context.Background(), "p1", []cardbox.NewCard{{
					CardID: "c1", Content: json.RawMessage(`"hi"`), Metadata: json.RawMessage(`{"type":"task.instruction"}`),
				}}); err != nil {
					t.Fatal(err)
				}
				return e.lockTable(t, "cards")
			},
			waiting: waitingOnLock,
		},
		{
			name: "CXDB context list, table locked", path: "/v1/contexts", route: "/v1/contexts", leave: true,
			block: func(t *testing.T, e *goneEnv) func() {
				t.Helper()
				tenant, err := e.engine.Tenant(context.Background(), ident.DefaultTenantID)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.engine.CreateContext(context.Background(), tenant, 0, "tag"); err != nil {
					t.Fatal(err)
				}
				return e.lockTable(t, "contexts")
			},
			waiting: waitingOnLock,
		},
		{
			name: "health check past the server's deadline", path: "/healthz", route: "/healthz", leave: false,
			block:   func(t *testing.T, e *goneEnv) func() { t.Helper(); return e.readyThenStarve(t) },
			waiting: healthEntered,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newGoneEnv(t)
			release := tc.block(t, e)
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			status := make(chan int, 1)
			go func() {
				res, err := http.DefaultClient.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					status <- res.StatusCode
				}
				done <- err
			}()
			tc.waiting(t, e, done)
			if tc.leave {
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("client: %v, want its cancellation", err)
				}
				waitfor.True(t, "the request counted as 499", 10*time.Second, func() bool {
					return e.requestsWith(tc.route, "499") == 1
				})
			} else if err := <-done; err != nil || <-status != http.StatusServiceUnavailable {
				t.Fatalf("client: %v, want a 503", err)
			}
			release()

			wantErrors, wantClosed := 0.0, 1.0
			if !tc.leave {
				wantErrors, wantClosed = 1, 0
			}
			if n := e.requestsWith(tc.route, "5"); n != wantErrors {
				t.Errorf("5xx counted: %v, want %v", n, wantErrors)
			}
			if n := e.requestsWith(tc.route, "499"); n != wantClosed {
				t.Errorf("499 counted: %v, want %v", n, wantClosed)
			}
			if n := e.v1Errors(t); n != wantErrors {
				t.Errorf("/v1/metrics errors.total = %v, want %v", n, wantErrors)
			}
			errs := e.logs.at(slog.LevelError)
			closed := e.logs.at(slog.LevelInfo, "http client closed request", "path="+tc.route, "status=499")
			access := e.logs.at(slog.LevelInfo, "http request", "route="+tc.route, "status=499")
			if tc.leave {
				if len(errs) != 0 {
					t.Errorf("logged at ERROR: %q", errs)
				}
				if len(closed) != 1 || len(access) != 1 {
					t.Errorf("info records: client closed %q, access log %q; want one each", closed, access)
				}
			} else {
				if len(errs) != 1 || !strings.Contains(errs[0], "503 UNAVAILABLE") {
					t.Errorf("ERROR records: %q, want the 503", errs)
				}
				if len(closed) != 0 {
					t.Errorf("a server deadline logged as client-closed: %q", closed)
				}
			}
		})
	}
}

// healthEntered waits until the request's health check began.
func healthEntered(t *testing.T, e *goneEnv, done <-chan error) {
	t.Helper()
	select {
	case <-e.entered:
	case err := <-done:
		t.Fatalf("the request ended (%v) before its health check", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no health check within 10 s")
	}
}

// waitingOnLock waits until the request waits for a lock in Postgres.
func waitingOnLock(t *testing.T, e *goneEnv, done <-chan error) {
	t.Helper()
	if err, ended := pgtest.UntilDoneOrWaiting(t, e.pool, done); ended {
		t.Fatalf("the request ended (%v) before waiting for the lock", err)
	}
}
