package cardboxhttp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// spellingCards are written as these bytes: keys out of order, numbers
// spelled several ways, nesting, unicode, characters encoding/json
// escapes, a tool call.
const spellingCards = `{"cards":[
 {"card_id":"rich",
  "content":{"zeta":[1.0,1e3,-0,2.50,1E-2,{"b":"<&>","a":"é日本😀"}],"alpha":"x` + "\u2028" + `y\u00e9\n","mid":{"nested":{"deeper":[true,false,null,{}]}}},
  "metadata":{"zz":1.0,"type":"tool.call","role":"assistant","a":"line\nbreak","author_id":"ann <a&b>","nested":{"y":[],"x":1e3}},
  "tool_calls":[{"type":"function","id":"call-1","function":{"name":"f","arguments":"{\"q\": 1}"}}],
  "tool_call_id":"call<1>"},
 {"card_id":"plain","content":"just text","metadata":{"type":"task.instruction"}}
]}`

// What the cards' stored JSON members are spelled as on every route: jsonb's
// order (by length, then bytes) and numbers, compact, with <, >, & and
// U+2028 escaped as encoding/json does.
var spelledMembers = map[string]map[string]string{
	"rich": {
		"content":    `{"mid":{"nested":{"deeper":[true,false,null,{}]}},"zeta":[1.0,1000,0,2.50,0.01,{"a":"é日本😀","b":"\u003c\u0026\u003e"}],"alpha":"x\u2028yé\n"}`,
		"metadata":   `{"a":"line\nbreak","zz":1.0,"role":"assistant","type":"tool.call","nested":{"x":1000,"y":[]},"author_id":"ann \u003ca\u0026b\u003e"}`,
		"tool_calls": `[{"id":"call-1","type":"function","function":{"name":"f","arguments":"{\"q\": 1}"}}]`,
		"type":       `"tool.call"`, "role": `"assistant"`, "author_id": `"ann \u003ca\u0026b\u003e"`, "tool_call_id": `"call\u003c1\u003e"`,
	},
	"plain": {
		"content": `"just text"`, "metadata": `{"role":"user","type":"task.instruction"}`, "tool_calls": `null`,
	},
}

// TestOneCardOneSpelling: a card is the same bytes on every route that
// answers it (the write's answer, a replay's, the card read, the batch
// read, the box's card list and the hydrated box batch, each cold and
// cached), and those bytes are the stored jsonb written as
// encoding/json.Marshal writes a json.RawMessage.
func TestOneCardOneSpelling(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache int64
	}{{"card cache on", 0}, {"card cache off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			pool := pgtest.NewPool(t)
			h := apitest.NewCardBoxWith(t, apitest.CardBoxOptions{Pool: pool, CardCacheBytes: tc.cache})
			seen := map[string]map[string]string{} // card id -> route -> bytes
			add := func(route string, cards []json.RawMessage) {
				t.Helper()
				for _, c := range cards {
					var id struct {
						CardID string `json:"card_id"`
					}
					if err := json.Unmarshal(c, &id); err != nil {
						t.Fatalf("%s: %v", route, err)
					}
					if seen[id.CardID] == nil {
						seen[id.CardID] = map[string]string{}
					}
					seen[id.CardID][route] = string(c)
				}
			}
			var written struct{ Cards []json.RawMessage }
			h.Do("POST", "/projects/p1/cards", spellingCards).Want(t, 201).JSON(t, &written)
			add("POST cards", written.Cards)
			var box struct {
				BoxID string `json:"box_id"`
			}
			h.Do("POST", "/projects/p1/boxes", map[string]any{"card_ids": []string{"rich", "plain"}}).Want(t, 201).JSON(t, &box)
			for _, pass := range []string{"cold", "cached"} {
				for _, id := range []string{"rich", "plain"} {
					add("GET card "+pass, []json.RawMessage{h.Do("GET", "/projects/p1/cards/"+id, nil).Want(t, 200).Body})
				}
				var batch struct{ Cards []json.RawMessage }
				h.Do("POST", "/projects/p1/cards/batch", map[string]any{"card_ids": []string{"plain", "rich"}}).Want(t, 200).JSON(t, &batch)
				add("POST cards/batch "+pass, batch.Cards)
				var list []json.RawMessage
				h.Do("GET", "/projects/p1/boxes/"+box.BoxID+"/cards", nil).Want(t, 200).JSON(t, &list)
				add("GET box cards "+pass, list)
				var boxes struct {
					Boxes []struct {
						HydratedCards []json.RawMessage `json:"hydrated_cards"`
					}
				}
				h.Do("POST", "/projects/p1/boxes/batch", map[string]any{"box_ids": []string{box.BoxID}, "hydrate": true}).Want(t, 200).JSON(t, &boxes)
				if len(boxes.Boxes) != 1 {
					t.Fatalf("boxes/batch: %d boxes", len(boxes.Boxes))
				}
				add("POST boxes/batch hydrated "+pass, boxes.Boxes[0].HydratedCards)
				var replay struct{ Cards []json.RawMessage }
				h.Do("POST", "/projects/p1/cards", spellingCards).Want(t, 201).JSON(t, &replay)
				add("POST cards replay "+pass, replay.Cards)
			}
			for id, want := range spelledMembers {
				routes := seen[id]
				if len(routes) != 11 { // the write, then 5 routes cold and cached
					t.Fatalf("card %s seen on %d routes, want 11", id, len(routes))
				}
				first := routes["POST cards"]
				for route, got := range routes {
					if got != first {
						t.Errorf("card %s:\n%s: %s\nPOST cards: %s", id, route, got, first)
					}
				}
				var members map[string]json.RawMessage
				if err := json.Unmarshal([]byte(first), &members); err != nil {
					t.Fatal(err)
				}
				for name, spelled := range want {
					if string(members[name]) != spelled {
						t.Errorf("card %s: %s = %s, want %s", id, name, members[name], spelled)
					}
				}
				for name, stored := range storedMembers(t, pool, id) {
					if m, _ := json.Marshal(stored); string(members[name]) != string(m) {
						t.Errorf("card %s: %s = %s; stored %s, which encoding/json writes %s", id, name, members[name], stored, m)
					}
				}
			}
		})
	}
}

// storedMembers reads a card's jsonb members as Postgres writes them.
func storedMembers(t *testing.T, pool *pgxpool.Pool, id string) map[string]json.RawMessage {
	t.Helper()
	var content, metadata, toolCalls *string
	err := pool.QueryRow(context.Background(), `SELECT content::text, metadata::text, tool_calls::text
		FROM cards WHERE tenant_id = 'p1' AND card_id = $1`, id).Scan(&content, &metadata, &toolCalls)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for name, v := range map[string]*string{"content": content, "metadata": metadata, "tool_calls": toolCalls} {
		if v == nil {
			out[name] = json.RawMessage("null")
			continue
		}
		out[name] = json.RawMessage(*v)
	}
	return out
}
