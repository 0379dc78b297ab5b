package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/api"
)

// stalled is a store whose Postgres does not answer: Healthy waits until
// its context ends.
type stalled struct{}

func (stalled) Healthy(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// /healthz answers within 2 s even when Postgres stalls: 503, not a hang.
func TestHealthzAnswersWhilePostgresStalls(t *testing.T) {
	srv := httptest.NewServer(api.New(api.Options{Health: stalled{}}))
	t.Cleanup(srv.Close)
	start := time.Now()
	res, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if took := time.Since(start); res.StatusCode != http.StatusServiceUnavailable || took > 3*time.Second {
		t.Fatalf("healthz: %d after %v, want 503 within about 2 s", res.StatusCode, took)
	}
}
