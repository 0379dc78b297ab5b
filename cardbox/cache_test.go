package cardbox

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// TestServiceCacheBound reads more cards than the cache holds: every
// answer is right and the cache stays within its budget.
func TestServiceCacheBound(t *testing.T) {
	ctx := context.Background()
	const budget = 32 << 10
	s := New(pgtest.Tx(t), Options{CardCacheBytes: budget})
	var ids []string
	for batch := range 5 {
		cards := make([]NewCard, rules.MaxAddCards)
		for i := range cards {
			id := fmt.Sprintf("card-%d-%d", batch, i)
			ids = append(ids, id)
			cards[i] = NewCard{
				CardID: id, Content: json.RawMessage(fmt.Sprintf("%q", id)),
				Metadata: json.RawMessage(`{"type":"agent.thought"}`),
			}
		}
		if _, err := s.AddCards(ctx, "p1", cards); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		for start := 0; start < len(ids); start += rules.MaxBatchIDs {
			res, err := s.GetCardsJSONWithin(ctx, "p1", ids[start:start+rules.MaxBatchIDs], unlimited)
			if err != nil {
				t.Fatal(err)
			}
			for i, raw := range res.Cards {
				var got struct {
					CardID  string `json:"card_id"`
					Content string `json:"content"`
				}
				if err := json.Unmarshal(raw, &got); err != nil || got.CardID != ids[start+i] || got.Content != got.CardID {
					t.Fatalf("round %d: card %d is %s (%v)", round, start+i, raw, err)
				}
			}
		}
		entries, used := s.cache.CardStats()
		if used > budget || entries == 0 || entries >= len(ids) {
			t.Fatalf("round %d: %d entries, %d bytes for a budget of %d", round, entries, used, budget)
		}
	}
}

// TestCacheOff: with a negative budget the JSON reads read every card.
func TestCacheOff(t *testing.T) {
	ctx := context.Background()
	s := New(pgtest.Tx(t), Options{CardCacheBytes: -1, Now: func() time.Time { return time.Unix(1e9, 0) }})
	if s.cache != nil {
		t.Fatal("cache on")
	}
	if _, err := s.AddCards(ctx, "p1", []NewCard{{CardID: "a", Metadata: json.RawMessage(`{"type":"agent.thought"}`)}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.GetCardsJSONWithin(ctx, "p1", []string{"a", "b"}, unlimited)
	if err != nil || len(res.Cards) != 1 || len(res.MissingIDs) != 1 {
		t.Fatalf("res = %+v, %v", res, err)
	}
}

// unlimited is a room that never runs out: these tests are of what the
// reads answer, not of their bounds.
func unlimited(int64) error { return nil }
