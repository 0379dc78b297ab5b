package cardbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/answer"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// TestMeasuredCardsAreAtLeastTheirJSON: a bounded read charges each card
// at least the bytes of its JSON, whether Postgres measures it (no cache)
// or the cache holds it, whatever its content escapes to.
func TestMeasuredCardsAreAtLeastTheirJSON(t *testing.T) {
	cards := []struct{ name, content, toolCalls, metadata string }{
		{"plain", `"hello"`, ``, `{"type":"task.instruction"}`},
		{"html escapes", `"<<<>>>&&&<a href=\"x\">&amp;</a>"`, ``, `{"type":"task.instruction","note":"<&>"}`},
		{"line separators", `"\u2028\u2029\u2028 and \u2029"`, ``, `{"type":"task.instruction"}`},
		{"control characters", `"\u0001\n\t\"\\"`, ``, `{"type":"task.instruction"}`},
		{"numbers", `[1.0, 1e3, -0, 123456789012345678901234567890]`, ``, `{"type":"task.instruction"}`},
		{"nested", `{"a": {"b": [1, {"c": "<"}]}, "bb": null}`, `[{"id": "t<1>", "args": {"q": "&"}}]`, `{"type":"tool.call","author_id":"<u>"}`},
		{"non-ASCII", `"héllo wörld ☃ 😀"`, ``, `{"type":"task.instruction","author_id":"é"}`},
	}
	for _, cacheBytes := range []int64{-1, 0} {
		svc := cardbox.New(pgtest.Tx(t), cardbox.Options{CardCacheBytes: cacheBytes})
		ctx := context.Background()
		project := fmt.Sprintf("p<&>%d", cacheBytes) // another project: pgtest.Tx's do not see each other's
		var ids []string
		for _, c := range cards {
			nc := cardbox.NewCard{CardID: "c<&>" + strings.ReplaceAll(c.name, " ", "-"), Content: json.RawMessage(c.content), Metadata: json.RawMessage(c.metadata)}
			if c.toolCalls != "" {
				nc.ToolCalls = json.RawMessage(c.toolCalls)
			}
			if _, err := svc.AddCards(ctx, project, []cardbox.NewCard{nc}); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			ids = append(ids, nc.CardID)
		}
		for _, pass := range []string{"first read", "second read"} {
			var asked []int64
			res, err := svc.GetCardsJSONWithin(ctx, project, ids, func(n int64) error {
				asked = append(asked, n)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Cards) != len(cards) || len(asked) != len(cards) || len(res.RemainingIDs) != 0 {
				t.Fatalf("cache %d, %s: %d cards, %d asked, remaining %v", cacheBytes, pass, len(res.Cards), len(asked), res.RemainingIDs)
			}
			for i, js := range res.Cards {
				if asked[i] < int64(len(js))+1 {
					t.Errorf("cache %d, %s, %s: charged %d bytes for %d bytes of JSON and a comma: %s", cacheBytes, pass, cards[i].name, asked[i], len(js), js)
				}
			}
		}
	}
}

// TestBoxPagesAreHeldToRoom: a page of a box's cards holds what room
// gives it, newest first, whether the box is a plain list of ids or has
// entries (zones and positions), and its cursor pages on through the rest
// until the whole box was read once, in box order.
func TestBoxPagesAreHeldToRoom(t *testing.T) {
	for _, tt := range []struct {
		name    string
		entries bool
	}{
		{"plain box", false},
		{"box with entries", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := cardbox.New(pgtest.Tx(t), cardbox.Options{})
			ctx := context.Background()
			var ids []string
			for i := range 7 {
				id := fmt.Sprintf("c%d", i)
				card := cardbox.NewCard{CardID: id, Content: json.RawMessage(`"` + strings.Repeat("x", 100) + `"`), Metadata: json.RawMessage(`{"type":"agent.thought"}`)}
				if _, err := svc.AddCards(ctx, "p", []cardbox.NewCard{card}); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			if _, err := svc.SaveBox(ctx, "p", "b", cardbox.BoxInput{CardIDs: ids[:6]}); err != nil {
				t.Fatal(err)
			}
			if tt.entries {
				if _, err := svc.InsertEntries(ctx, "p", "b", ids[6:], layout.Place{}, false); err != nil {
					t.Fatal(err)
				}
			} else if _, err := svc.AppendToBox(ctx, "p", "b", ids[6:]); err != nil {
				t.Fatal(err)
			}
			one, err := svc.GetCardJSONWithin(ctx, "p", "c0", unlimited)
			if err != nil {
				t.Fatal(err)
			}
			var read []string
			cursor, pages := "", 0
			for {
				room := 3 * int64(len(one)+1) // three cards and their commas
				page, err := svc.BoxCardsJSONWithin(ctx, "p", "b", 100, cursor, func(n int64) error {
					if n > room {
						return answer.ErrAnswerFull
					}
					room -= n
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Cards) == 0 || len(page.Cards) > 3 {
					t.Fatalf("page %d holds %d cards; room gives 1 to 3", pages, len(page.Cards))
				}
				var got []string
				for _, c := range page.Cards {
					var card struct {
						CardID string `json:"card_id"`
					}
					if err := json.Unmarshal(c, &card); err != nil {
						t.Fatal(err)
					}
					got = append(got, card.CardID)
				}
				read = append(got, read...)
				pages++
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
			if strings.Join(read, ",") != strings.Join(ids, ",") || pages < 3 {
				t.Fatalf("read %v in %d pages, want %v in at least 3", read, pages, ids)
			}
		})
	}
}
