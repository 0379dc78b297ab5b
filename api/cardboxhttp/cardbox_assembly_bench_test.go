package cardboxhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/assembly"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
)

// BenchmarkAssemble1000 measures POST .../assemble of a box of 1,000
// cards of about 200 bytes under a budget that keeps about 100 of them,
// from 16 clients, over real HTTP and Postgres (token counts are stored
// when the cards are written). It reports requests per second and the
// median latency. Run:
//
//	go test ./api/ -run '^$' -bench Assemble1000 -benchtime 10s
func BenchmarkAssemble1000(b *testing.B) {
	h := apitest.NewCardBox(b)
	ctx := context.Background()
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
		if _, err := h.Svc.AddCards(ctx, "bench", cards); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := h.Svc.SaveBox(ctx, "bench", "window", cardbox.BoxInput{CardIDs: ids}); err != nil {
		b.Fatal(err)
	}
	probe, err := h.Svc.Assemble(ctx, "bench", "window", assembly.Request{Budget: 1 << 30, Tokenizer: "cl100k_base"})
	if err != nil {
		b.Fatal(err)
	}
	budget := probe.Tokens / 10
	body, _ := json.Marshal(map[string]any{"budget": budget, "tokenizer": "cl100k_base", "format": "messages"})
	kept, err := h.Svc.Assemble(ctx, "bench", "window", assembly.Request{Budget: budget, Tokenizer: "cl100k_base"})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("1,000 cards, %d tokens; budget %d keeps %d cards", probe.Tokens, budget, len(kept.EntryIDs))
	url := h.URL + "/projects/bench/boxes/window/assemble"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)
	var mu sync.Mutex
	var latencies []time.Duration
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			start := time.Now()
			res, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Errorf("status %d", res.StatusCode)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		latencies = append(latencies, mine...)
		mu.Unlock()
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	if len(latencies) > 0 {
		slices.Sort(latencies)
		b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkDeriveBox1000Turns measures POST .../derive of a box from a
// context of 1,000 conversation turns written over the binary protocol,
// the first time (1,000 new cards) and again (the cards reused). Run:
//
//	go test ./api/ -run '^$' -bench DeriveBox1000Turns -benchtime 3x
func BenchmarkDeriveBox1000Turns(b *testing.B) {
	h := apitest.NewCXDB(b)
	h.PublishConversationBundle()
	c := h.Client()
	ctx := context.Background()
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		item := map[uint64]any{1: "user_input", 10: map[uint64]any{1: fmt.Sprintf("message %d: %s", i, strings.Repeat("words ", 20))}}
		if i%2 == 1 {
			item = map[uint64]any{1: "assistant_turn", 11: map[uint64]any{1: fmt.Sprintf("answer %d: %s", i, strings.Repeat("more ", 20))}}
		}
		payload, err := msgpack.Marshal(item)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3, Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	body := fmt.Sprintf(`{"context_id": "%d"}`, head.ContextID)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		res := h.Call("POST", fmt.Sprintf("/projects/default/boxes/derived-%d/derive", i), body)
		if res.Status != 200 {
			b.Fatalf("derive: %d %s", res.Status, res.Body)
		}
		b.Logf("derive %d: %v", i, time.Since(start))
	}
}
