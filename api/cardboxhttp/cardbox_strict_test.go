package cardboxhttp_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
)

// Strict input: every request body of the CardBox routes is checked before
// it is decoded, so that careless and hostile bodies are a 400 that names
// the field, never a 500 and never stored altered.

// badStrings are JSON string contents that cannot be stored as sent.
var badStrings = []struct{ name, raw, reason string }{
	{"NUL escape", `a\u0000b`, "NUL"},
	{"invalid UTF-8", "a\xffb", "UTF-8"},
	{"truncated UTF-8", "a\xc3", "UTF-8"},
	{"UTF-8 encoded surrogate", "\xed\xa0\x80", "UTF-8"},
	{"lone high surrogate", `\ud800`, "surrogate"},
	{"high surrogate then letter", `\uD83Dx`, "surrogate"},
	{"lone low surrogate", `\udc00`, "surrogate"},
	{"reversed pair", `\udc00\ud800`, "surrogate"},
}

func TestStrictJSONRejectsBadStrings(t *testing.T) {
	h := apitest.NewCardBox(t)
	h.AddCards("p1", apitest.Card("ok", "task.instruction", "x"))
	h.Do("PUT", "/projects/p1/boxes/b", map[string]any{"card_ids": []string{"ok"}}).Want(t, 200)
	// Each template has one %s where a bad string goes, and the field that
	// the error must name.
	templates := []struct{ method, path, body, field string }{
		{"POST", "/projects/p1/cards", `{"card_id":"c1","content":"%s","metadata":{"type":"task.instruction"}}`, "content"},
		{"POST", "/projects/p1/cards", `{"cards":[{"card_id":"c1","content":{"parts":[1,{"text":"%s"}]},"metadata":{"type":"task.instruction"}}]}`, "cards[0].content.parts[1].text"},
		{"POST", "/projects/p1/cards", `{"cards":[{"card_id":"c1","metadata":{"type":"task.instruction","note":"%s"}}]}`, "cards[0].metadata.note"},
		{"POST", "/projects/p1/cards", `{"cards":[{"card_id":"c1","metadata":{"type":"task.instruction","%s":1}}]}`, "cards[0].metadata"},
		{"POST", "/projects/p1/cards", `{"cards":[{"card_id":"c1","tool_calls":[{"id":"%s"}],"metadata":{"type":"tool.call"}}]}`, "cards[0].tool_calls[0].id"},
		{"POST", "/projects/p1/cards", `{"card_id":"c1","tool_call_id":"%s","metadata":{"type":"tool.result"}}`, "tool_call_id"},
		{"POST", "/projects/p1/cards", `{"card_id":"c%s","metadata":{"type":"task.instruction"}}`, "card_id"},
		{"POST", "/projects/p1/cards", `{"card_id":"c1","content":{"%s":"v"},"metadata":{"type":"task.instruction"}}`, "content"},
		{"POST", "/projects/p1/cards/batch", `{"card_ids":["ok","%s"]}`, "card_ids[1]"},
		{"POST", "/projects/p1/boxes/batch", `{"box_ids":["b%s"]}`, "box_ids[0]"},
		{"PUT", "/projects/p1/boxes/b", `{"card_ids":["ok"],"metadata":{"agent":{"name":"%s"}}}`, "metadata.agent.name"},
		{"PUT", "/projects/p1/boxes/b", `{"card_ids":["ok"],"parent_ids":["%s"]}`, "parent_ids[0]"},
		{"POST", "/projects/p1/boxes", `{"card_ids":["ok"],"metadata":{"%s":true}}`, "metadata"},
		{"POST", "/projects/p1/boxes/b/append", `{"card_ids":["%s"]}`, "card_ids[0]"},
	}
	for i, tpl := range templates {
		for _, bad := range badStrings {
			t.Run(fmt.Sprintf("%d %s/%s", i, tpl.field, bad.name), func(t *testing.T) {
				body := fmt.Sprintf(tpl.body, bad.raw)
				e := h.Do(tpl.method, tpl.path, body).Want(t, 400).APIError(t)
				if e.Details["field"] != tpl.field || !strings.Contains(e.Message, bad.reason) {
					t.Errorf("error = %+v, want field %q and a message about %s", e, tpl.field, bad.reason)
				}
			})
		}
	}
	// Nothing was stored, and the box is as it was.
	h.Do("GET", "/projects/p1/cards/c1", nil).Want(t, 404)
	var b boxBody
	h.Do("GET", "/projects/p1/boxes/b", nil).Want(t, 200).JSON(t, &b)
	if len(b.CardIDs) != 1 || len(b.Metadata) != 0 || len(b.ParentIDs) != 0 {
		t.Errorf("box changed: %+v", b)
	}
}

func TestStrictJSONKeepsGoodStrings(t *testing.T) {
	h := apitest.NewCardBox(t)
	// Escapes that are characters, a valid pair, raw UTF-8 and U+FFFD as
	// sent are all stored as they are.
	h.Do("POST", "/projects/p1/cards", `{"card_id":"ü\u00e9","content":"a\"\\\/\b\f\n\r\t\u0041 \ud83d\ude00 😀 \ufffd �","metadata":{"type":"task.instruction","\u0074ag":"x"}}`).Want(t, 201)
	var c map[string]any
	h.Do("GET", "/projects/p1/cards/%C3%BC%C3%A9", nil).Want(t, 200).JSON(t, &c)
	if want := "a\"\\/\b\f\n\r\tA 😀 😀 \ufffd \ufffd"; c["content"] != want {
		t.Errorf("content = %q, want %q", c["content"], want)
	}
	if c["metadata"].(map[string]any)["tag"] != "x" {
		t.Errorf("metadata = %v", c["metadata"])
	}
}

func TestStrictJSONRejectsUnknownFields(t *testing.T) {
	h := apitest.NewCardBox(t)
	h.AddCards("p1", apitest.Card("ok", "task.instruction", "x"))
	tests := []struct{ method, path, body, field string }{
		{"POST", "/projects/p1/cards", `{"card_id":"typo","contnet":"x","metadata":{"type":"task.instruction"}}`, "contnet"},
		{"POST", "/projects/p1/cards", `{"cards":[{"card_id":"typo","metadata":{"type":"task.instruction"},"ttl":5}]}`, "cards[0].ttl"},
		{"POST", "/projects/p1/cards", `{"card_id":"typo","Content":"x","metadata":{"type":"task.instruction"}}`, "Content"},
		{"POST", "/projects/p1/cards", `{"kards":[]}`, "kards"},
		{"POST", "/projects/p1/cards/batch", `{"card_ids":["ok"],"hydrate":true}`, "hydrate"},
		{"POST", "/projects/p1/cards/batch", `{"ids":["ok"]}`, "ids"},
		{"POST", "/projects/p1/boxes/batch", `{"box_ids":[],"hydrated":true}`, "hydrated"},
		{"PUT", "/projects/p1/boxes/b", `{"card_ids":["ok"],"meta":{}}`, "meta"},
		{"POST", "/projects/p1/boxes", `{"cards":["ok"]}`, "cards"},
		{"POST", "/projects/p1/boxes/b/append", `{"card_ids":["ok"],"at":0}`, "at"},
	}
	for _, tt := range tests {
		t.Run(tt.path+" "+tt.field, func(t *testing.T) {
			e := h.Do(tt.method, tt.path, tt.body).Want(t, 400).APIError(t)
			if e.Details["field"] != tt.field || !strings.Contains(e.Message, fmt.Sprintf("unknown field %q", lastName(tt.field))) {
				t.Errorf("error = %+v, want unknown field %s", e, tt.field)
			}
		})
	}
	// The typo did not store a card, so the id is still free.
	h.Do("POST", "/projects/p1/cards", apitest.Card("typo", "task.instruction", "x")).Want(t, 201)
	// Members of content and metadata are the client's own.
	h.Do("POST", "/projects/p1/cards", `{"card_id":"free","content":{"contnet":1},"metadata":{"type":"task.instruction","anything":{"goes":[1]}}}`).Want(t, 201)
}

// lastName returns the last member name of a field path.
func lastName(field string) string {
	return field[strings.LastIndex(field, ".")+1:]
}

func TestStrictJSONRejectsRepeatedMembers(t *testing.T) {
	h := apitest.NewCardBox(t)
	tests := []struct{ body, field string }{
		{`{"card_id":"a","card_id":"b","metadata":{"type":"task.instruction"}}`, "card_id"},
		{`{"card_id":"a","metadata":{"type":"task.instruction","type":"agent.thought"}}`, "metadata.type"},
		{`{"card_id":"a","content":{"x":1,"\u0078":2},"metadata":{"type":"task.instruction"}}`, "content.x"},
	}
	for _, tt := range tests {
		e := h.Do("POST", "/projects/p1/cards", tt.body).Want(t, 400).APIError(t)
		if e.Details["field"] != tt.field || !strings.Contains(e.Message, "more than once") {
			t.Errorf("%s: error = %+v, want field %s", tt.body, e, tt.field)
		}
	}
	h.Do("GET", "/projects/p1/cards/a", nil).Want(t, 404)
}

func TestStrictJSONRejectsCardsBesideABareCard(t *testing.T) {
	h := apitest.NewCardBox(t)
	for _, body := range []string{
		`{"cards":[{"card_id":"a","metadata":{"type":"task.instruction"}}],"card_id":"b","content":"dropped"}`,
		`{"content":"dropped","cards":[{"card_id":"a","metadata":{"type":"task.instruction"}}]}`,
		`{"cards":[{"card_id":"a","metadata":{"type":"task.instruction"}}],"tool_call_id":null}`,
	} {
		e := h.Do("POST", "/projects/p1/cards", body).Want(t, 400).APIError(t)
		if e.Details["field"] != "cards" || !strings.Contains(e.Message, "cannot be combined") {
			t.Errorf("%s: error = %+v", body, e)
		}
	}
	h.Do("GET", "/projects/p1/cards/a", nil).Want(t, 404)
}

// {"cards":null} is a batch that names no array, not a bare card without
// metadata: the error says so.
func TestStrictJSONRejectsNullCards(t *testing.T) {
	h := apitest.NewCardBox(t)
	for _, body := range []string{`{"cards":null}`, `{"cards" : null }`} {
		e := h.Do("POST", "/projects/p1/cards", body).Want(t, 400).APIError(t)
		if e.Details["field"] != "cards" || !strings.Contains(e.Message, "must be an array of items, not null") {
			t.Errorf("%s: error = %+v", body, e)
		}
	}
}

func TestRepeatedIDsInOneWrite(t *testing.T) {
	h := apitest.NewCardBox(t)
	h.AddCards("p1", apitest.Card("ok", "task.instruction", "x"))
	tests := []struct {
		name, method, path string
		body               any
		field, id          string
	}{
		{"same card twice", "POST", "/projects/p1/cards", map[string]any{"cards": []any{
			apitest.Card("c", "task.instruction", "1"), apitest.Card("d", "task.instruction", "1"), apitest.Card("c", "task.instruction", "1"),
		}}, "cards[2].card_id", "c"},
		{"same id, other content", "POST", "/projects/p1/cards", map[string]any{"cards": []any{
			apitest.Card("c", "task.instruction", "1"), apitest.Card("c", "task.instruction", "2"),
		}}, "cards[1].card_id", "c"},
		{"repeated parent", "PUT", "/projects/p1/boxes/b", map[string]any{
			"card_ids": []string{"ok"}, "parent_ids": []string{"p", "q", "p"},
		}, "parent_ids[2]", "p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := h.Do(tt.method, tt.path, tt.body).Want(t, 400).APIError(t)
			if e.Details["field"] != tt.field || !strings.Contains(e.Message, fmt.Sprintf("%q", tt.id)) {
				t.Errorf("error = %+v, want field %s naming %q", e, tt.field, tt.id)
			}
		})
	}
	h.Do("GET", "/projects/p1/cards/c", nil).Want(t, 404)
	h.Do("GET", "/projects/p1/boxes/b", nil).Want(t, 404)
	// A box is a list: its card ids may repeat, in a write and across
	// appends; batch reads drop repeats.
	h.Do("PUT", "/projects/p1/boxes/b", map[string]any{"card_ids": []string{"ok", "ok"}}).Want(t, 200)
	h.Do("POST", "/projects/p1/boxes/b/append", map[string]any{"card_ids": []string{"ok", "ok"}}).Want(t, 200)
	h.Do("POST", "/projects/p1/cards/batch", map[string]any{"card_ids": []string{"ok", "ok"}}).Want(t, 200)
}

func TestStrictJSONNumbersPostgresCannotStore(t *testing.T) {
	h := apitest.NewCardBox(t)
	for _, n := range []string{"1e131072", "1e-16384", "-1.5e999999999999999999999", "0.5e-16383"} {
		body := `{"card_id":"n","content":{"x":[` + n + `]},"metadata":{"type":"task.instruction"}}`
		e := h.Do("POST", "/projects/p1/cards", body).Want(t, 400).APIError(t)
		if e.Details["field"] != "content.x[0]" {
			t.Errorf("%s: error = %+v", n, e)
		}
	}
	// The extremes that fit are stored.
	h.Do("POST", "/projects/p1/cards", `{"card_id":"n","content":[1e131071,1e-16383,-0,0],"metadata":{"type":"task.instruction"}}`).Want(t, 201)
}
