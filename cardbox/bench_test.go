package cardbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// BenchmarkAddCards100 measures AddCards of 100 new cards per call against
// real Postgres. Run:
//
//	go test ./cardbox/ -run '^$' -bench AddCards100 -benchtime 5s
func BenchmarkAddCards100(b *testing.B) {
	ctx := context.Background()
	s := cardbox.New(pgtest.NewPool(b), cardbox.Options{})
	meta := json.RawMessage(`{"type":"agent.thought","author_id":"agent-1","step_id":"s1"}`)
	content := json.RawMessage(`"I need to list the key points of the report first, then summarize them."`)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		cards := make([]cardbox.NewCard, 100)
		for pb.Next() {
			for i := range cards {
				cards[i] = cardbox.NewCard{Content: content, Metadata: meta}
			}
			if _, err := s.AddCards(ctx, "bench", cards); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "cards/s")
}

// BenchmarkAddCards100Serial is BenchmarkAddCards100 from one goroutine.
func BenchmarkAddCards100Serial(b *testing.B) {
	ctx := context.Background()
	s := cardbox.New(pgtest.NewPool(b), cardbox.Options{})
	meta := json.RawMessage(`{"type":"agent.thought","author_id":"agent-1"}`)
	for i := 0; b.Loop(); i++ {
		cards := make([]cardbox.NewCard, 100)
		for j := range cards {
			cards[j] = cardbox.NewCard{
				CardID: fmt.Sprintf("c-%d-%d", i, j), Content: json.RawMessage(`"note"`), Metadata: meta,
			}
		}
		if _, err := s.AddCards(ctx, "bench", cards); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "cards/s")
}
