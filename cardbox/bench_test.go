package cardbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/assembly"
	"github.com/cardboxhq/cardbox/cardbox/rules"
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

// benchReadService returns a Service with a cache of cacheBytes and the ids
// of 100 live cards in project "bench", each read once so that the cache
// (when on) holds them all.
func benchReadService(b *testing.B, cacheBytes int64) (*cardbox.Service, []string) {
	b.Helper()
	ctx := context.Background()
	s := cardbox.New(pgtest.NewPool(b), cardbox.Options{CardCacheBytes: cacheBytes})
	meta := json.RawMessage(`{"type":"agent.thought","author_id":"agent-1","step_id":"s1"}`)
	cards := make([]cardbox.NewCard, 100)
	ids := make([]string, len(cards))
	for i := range cards {
		ids[i] = fmt.Sprint("card-", i)
		cards[i] = cardbox.NewCard{
			CardID:   ids[i],
			Content:  json.RawMessage(fmt.Sprintf(`"note %d: the key points of the report, then a summary of them."`, i)),
			Metadata: meta,
		}
	}
	if _, err := s.AddCards(ctx, "bench", cards); err != nil {
		b.Fatal(err)
	}
	if res, err := s.GetCardsJSONWithin(ctx, "bench", ids, unlimited); err != nil || len(res.Cards) != len(ids) {
		b.Fatalf("warm-up read: %d cards, %v", len(res.Cards), err)
	}
	return s, ids
}

// BenchmarkGetCardsJSON100 measures GetCardsJSONWithin of 100 cached cards per
// call from many goroutines against real Postgres: the liveness query and
// 100 cache hits. Run:
//
//	go test ./cardbox/ -run '^$' -bench GetCardsJSON100 -benchtime 5s
func BenchmarkGetCardsJSON100(b *testing.B) {
	benchGetCardsJSON(b, 0, true)
}

// BenchmarkGetCardsJSON100Serial is BenchmarkGetCardsJSON100 from one
// goroutine.
func BenchmarkGetCardsJSON100Serial(b *testing.B) {
	benchGetCardsJSON(b, 0, false)
}

// BenchmarkGetCardsJSON100NoCache is BenchmarkGetCardsJSON100 with the
// cache off, every card read in full and rendered: what the cache saves.
func BenchmarkGetCardsJSON100NoCache(b *testing.B) {
	benchGetCardsJSON(b, -1, true)
}

func benchGetCardsJSON(b *testing.B, cacheBytes int64, parallel bool) {
	b.Helper()
	ctx := context.Background()
	s, ids := benchReadService(b, cacheBytes)
	read := func() bool {
		res, err := s.GetCardsJSONWithin(ctx, "bench", ids, unlimited)
		if err != nil || len(res.Cards) != len(ids) {
			b.Errorf("%d cards, %v", len(res.Cards), err)
			return false
		}
		return true
	}
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() && read() {
			}
		})
	} else {
		for b.Loop() && read() {
		}
	}
	b.ReportMetric(float64(b.N*len(ids))/b.Elapsed().Seconds(), "cards/s")
}

// BenchmarkAppendToBox measures appends of one card to boxes of one
// project from parallel goroutines, each appending to its own box (a box
// is started afresh before it would reach MaxBoxCards). Run:
//
//	go test ./cardbox/ -run '^$' -bench AppendToBox -benchtime 5s
func BenchmarkAppendToBox(b *testing.B) {
	ctx := context.Background()
	s := cardbox.New(pgtest.NewPool(b), cardbox.Options{})
	if _, err := s.AddCards(ctx, "bench", []cardbox.NewCard{{CardID: "c", Content: json.RawMessage(`"note"`),
		Metadata: json.RawMessage(`{"type":"agent.thought"}`)}}); err != nil {
		b.Fatal(err)
	}
	var boxes atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		box, n := "", rules.MaxBoxCards
		for pb.Next() {
			if n == rules.MaxBoxCards {
				box, n = fmt.Sprintf("box-%d", boxes.Add(1)), 0
				if _, err := s.SaveBox(ctx, "bench", box, cardbox.BoxInput{}); err != nil {
					b.Error(err)
					return
				}
			}
			if _, err := s.AppendToBox(ctx, "bench", box, []string{"c"}); err != nil {
				b.Error(err)
				return
			}
			n++
		}
	})
}

// BenchmarkAssemble1000Serial measures Assemble of a plain box of 1,000
// cards of about 200 bytes under a budget that keeps about 100, as chat
// messages, from one goroutine, without HTTP: the box query, the caches
// and the rendering (the HTTP benchmark is api/cardboxhttp's
// BenchmarkAssemble1000). Run:
//
//	go test ./cardbox/ -run '^$' -bench Assemble1000Serial -benchtime 5s
func BenchmarkAssemble1000Serial(b *testing.B) {
	ctx := context.Background()
	s := cardbox.New(pgtest.NewPool(b), cardbox.Options{})
	var ids []string
	for start := 0; start < 1000; start += rules.MaxAddCards {
		var cards []cardbox.NewCard
		for i := start; i < start+rules.MaxAddCards; i++ {
			id := fmt.Sprintf("turn-%04d", i)
			text := fmt.Sprintf("Step %d: the agent looked at the report again and noted that section %d covers the quarterly revenue, the hiring plan and two open risks for the team to review. ", i, i%17)
			content, _ := json.Marshal(text[:min(len(text), 200)])
			cards = append(cards, cardbox.NewCard{CardID: id, Content: content, Metadata: json.RawMessage(`{"type":"agent.thought"}`)})
			ids = append(ids, id)
		}
		if _, err := s.AddCards(ctx, "bench", cards); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.SaveBox(ctx, "bench", "window", cardbox.BoxInput{CardIDs: ids}); err != nil {
		b.Fatal(err)
	}
	req := assembly.Request{Budget: 3600, Tokenizer: "cl100k_base", Format: assembly.FormatMessages}
	if _, err := s.Assemble(ctx, "bench", "window", req); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Assemble(ctx, "bench", "window", req); err != nil {
			b.Fatal(err)
		}
	}
}
