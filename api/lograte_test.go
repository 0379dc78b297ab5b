package api_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/internal/logtest"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store"
)

// Postgres gone makes every request fail: the log says so once per
// kind and interval with a count, the request metrics count each. Before
// /healthz first answered ok, its 503 is not an error at all.
func TestRepeatedServerErrorsAreCountedNotEachLogged(t *testing.T) {
	t.Parallel()
	proxy, url := pgtest.NewProxy(t, pgtest.NewDB(t))
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	engine, err := store.Open(ctx, store.Options{Dir: t.TempDir(), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	errs, all := &logtest.Errors{}, &logtest.All{}
	metrics := api.NewHTTPMetrics()
	h := api.New(api.Options{Health: engine, HTTPMetrics: metrics, Logger: slog.New(logtest.Tee{errs, all}),
		ErrorLogInterval: time.Hour}) // however long the test takes, one interval
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	get := func() (int, error) {
		res, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			return 0, err
		}
		res.Body.Close()
		return res.StatusCode, nil
	}

	// Starting: Postgres is not there yet.
	proxy.Cut()
	if status, err := get(); err != nil || status != http.StatusServiceUnavailable {
		t.Fatalf("/healthz before Postgres answers: %d, %v", status, err)
	}
	if recs := errs.Records(); len(recs) != 0 {
		t.Fatalf("/healthz's 503 before the server was ever ready logged at ERROR: %q", recs)
	}
	if !strings.Contains(strings.Join(all.Records(), "\n"), "not ready yet") {
		t.Fatalf("the start-up 503 is not logged at all: %q", all.Records())
	}
	proxy.Restore()
	waitfor.True(t, "/healthz to answer ok", 10*time.Second, func() bool {
		status, err := get()
		return err == nil && status == http.StatusOK
	})

	// An outage: 10,000 failed requests. (Postgres's pool is closed: each
	// fails at once, where cutting the connections again would cost each
	// request a connection attempt.) The 503s counted before it are the
	// start-up's: one, or more when /healthz was polled before it was ready.
	unavailable := func() float64 { return testutil.ToFloat64(metrics.Requests(http.MethodGet, "/healthz", "503")) }
	before := unavailable()
	if before < 1 {
		t.Fatalf("cardbox_http_requests_total counts %v 503s at start-up, want the first /healthz's", before)
	}
	pool.Close()
	const n, workers = 10_000, 4
	failures := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range n / workers {
				// The handler itself, without a connection each: the
				// test is about what happens after the request arrived.
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
				if rec.Code != http.StatusServiceUnavailable {
					failures <- fmt.Errorf("worker %d: /healthz in the outage: %d %s", w, rec.Code, rec.Body)
					return
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}
	h.FlushErrorLog()
	recs := errs.Records()
	if len(recs) != 2 {
		t.Fatalf("%d records at ERROR for %d failed requests, want the first and one count: %q", len(recs), n, recs)
	}
	if got := countedErrors(t, recs); got != n {
		t.Fatalf("the ERROR records stand for %d failed requests, want %d: %q", got, n, recs)
	}
	if !strings.Contains(recs[len(recs)-1], "request failed: 503 UNAVAILABLE ×") {
		t.Fatalf("the summary: %q", recs[len(recs)-1])
	}
	if got := unavailable() - before; got != n {
		t.Fatalf("cardbox_http_requests_total counts %v 503s in the outage, want %d", got, n)
	}
}

// countedErrors is how many events records stand for: one each, or their
// summary's count.
func countedErrors(t *testing.T, recs []string) int {
	t.Helper()
	total := 0
	for _, r := range recs {
		m := regexp.MustCompile(` repeated=(\d+)`).FindStringSubmatch(r)
		if m == nil {
			total++
			continue
		}
		k, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(errors.Join(err, fmt.Errorf("record %q", r)))
		}
		total += k
	}
	return total
}
