package api_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/cardboxhttp"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestAccessLogAndRequestMetrics(t *testing.T) {
	var logs syncBuffer
	m := api.NewHTTPMetrics()
	srv := httptest.NewServer(api.New(api.Options{
		Routes:      []api.Routes{cardboxhttp.New(cardbox.New(pgtest.NewPool(t), cardbox.Options{}))},
		Logger:      slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		HTTPMetrics: m, AccessLog: true,
	}))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/healthz", "/projects/p1/cards/a", "/projects/p1/cards/b", "/no/such/route"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	want := map[[2]string]float64{
		{"/healthz", "200"}:                             1,
		{"/projects/:project_id/cards/:card_id", "404"}: 2,
		{"unmatched", "404"}:                            1,
	}
	for k, n := range want {
		if got := testutil.ToFloat64(m.Requests("GET", k[0], k[1])); got != n {
			t.Errorf("requests{route=%q,status=%s} = %v, want %v", k[0], k[1], got, n)
		}
	}
	out := logs.String()
	for _, s := range []string{
		`msg="http request" method=GET route=/healthz status=200`,
		`route=/projects/:project_id/cards/:card_id status=404`,
		`msg="http client error" method=GET path=/projects/p1/cards/b status=404 peer=127.0.0.1:`,
	} {
		if !strings.Contains(out, s) {
			t.Errorf("log lacks %q:\n%s", s, out)
		}
	}
}
