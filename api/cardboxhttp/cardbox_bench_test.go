package cardboxhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"testing"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// BenchmarkCardsBatch100 measures POST /projects/{p}/cards/batch with 100
// ids over real HTTP and Postgres. Run:
//
//	go test ./api/ -run '^$' -bench CardsBatch100 -benchtime 5s
func BenchmarkCardsBatch100(b *testing.B) {
	h := apitest.NewCardBox(b)
	ids := h.Notes("bench", "card-", 100)
	body, _ := json.Marshal(map[string]any{"card_ids": ids})
	batchReads(b, h.URL+"/projects/bench/cards/batch", [][]byte{body})
}

// BenchmarkCardsBatch100AfterBulkLoad measures the same right after a bulk
// load of 1,000,000 cards, one project of 500,000 beside 1,000 projects of
// 500, into a fresh database with autovacuum off for cards and nothing
// analyzed: what a new server sees after an import, or a tenant that grew
// faster than autovacuum looks. The reads must not depend on statistics.
// Each request asks for 100 random ids of the project, from as many
// clients as GOMAXPROCS and then from 8. Run:
//
//	go test ./api/ -run '^$' -bench CardsBatch100AfterBulkLoad -benchtime 5s
func BenchmarkCardsBatch100AfterBulkLoad(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.NewPool(b)
	if _, err := pool.Exec(ctx, "ALTER TABLE cards SET (autovacuum_enabled = false)"); err != nil {
		b.Fatal(err)
	}
	h := apitest.NewCardBoxWith(b, apitest.CardBoxOptions{Pool: pool})
	projects := map[string]int{"large": 500_000}
	for i := range 1000 {
		projects[fmt.Sprintf("small-%d", i)] = 500
	}
	bulkLoad(b, h.Svc, projects)
	var analyzed bool
	err := pool.QueryRow(ctx, `SELECT last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL
		FROM pg_stat_user_tables WHERE relname = 'cards'`).Scan(&analyzed)
	if err != nil || analyzed {
		b.Fatalf("cards analyzed: %v (%v)", analyzed, err)
	}
	for _, project := range []string{"large", "small-500"} {
		rng := rand.New(rand.NewPCG(1, 2))
		bodies := make([][]byte, 64)
		for i := range bodies {
			var ids []string
			for seen := map[int]bool{}; len(ids) < 100; {
				if k := rng.IntN(projects[project]); !seen[k] {
					seen[k] = true
					ids = append(ids, fmt.Sprintf("card-%d", k))
				}
			}
			bodies[i], _ = json.Marshal(map[string]any{"card_ids": ids})
		}
		b.Run(project, func(b *testing.B) { batchReads(b, h.URL+"/projects/"+project+"/cards/batch", bodies) })
		// The same with 8 clients: the target was measured with 2, 8 or 32.
		b.Run(project+"/clients=8", func(b *testing.B) {
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
			batchReads(b, h.URL+"/projects/"+project+"/cards/batch", bodies)
		})
	}
}

// bulkLoad writes cards card-0 … card-(n-1) to each project through the
// service, 100 per call, from two goroutines.
func bulkLoad(b *testing.B, svc *cardbox.Service, projects map[string]int) {
	b.Helper()
	type call struct {
		project string
		from, n int
	}
	calls := make(chan call)
	go func() {
		defer close(calls)
		for p, n := range projects {
			for from := 0; from < n; from += rules.MaxAddCards {
				calls <- call{p, from, min(rules.MaxAddCards, n-from)}
			}
		}
	}()
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for c := range calls {
				cards := make([]cardbox.NewCard, c.n)
				for i := range cards {
					id := fmt.Sprintf("card-%d", c.from+i)
					cards[i] = cardbox.NewCard{CardID: id, Content: json.RawMessage(`"note ` + id + `"`), Metadata: json.RawMessage(`{"type":"task.instruction"}`)}
				}
				if _, err := svc.AddCards(context.Background(), c.project, cards); err != nil {
					errs <- err
					for range calls { // let the producer finish
					}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// batchReads posts the bodies in turn to url from parallel clients and
// reports requests per second; each answer must be a 200 with cards.
func batchReads(b *testing.B, url string, bodies [][]byte) {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			res, err := client.Post(url, "application/json", bytes.NewReader(bodies[i%len(bodies)]))
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
