package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// BenchmarkCardsBatch100 measures POST /projects/{p}/cards/batch with 100
// ids over real HTTP and Postgres. Run:
//
//	go test ./api/ -run '^$' -bench CardsBatch100 -benchtime 5s
func BenchmarkCardsBatch100(b *testing.B) {
	h := newHarness(b)
	ids := h.notes("bench", "card-", 100)
	body, _ := json.Marshal(map[string]any{"card_ids": ids})
	url := h.url + "/projects/bench/cards/batch"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			n, _ := io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || n < 100*50 {
				b.Errorf("status %d, %d bytes", res.StatusCode, n)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
