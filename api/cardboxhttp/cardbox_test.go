package cardboxhttp_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/cardbox/sweep"
)

func TestCardsWriteAndRead(t *testing.T) {
	h := apitest.NewCardBox(t)
	stored := h.AddCards("p1",
		apitest.Card("a", "task.instruction", "summarize"),
		map[string]any{
			"card_id": "b", "content": nil, "tool_calls": []any{map[string]any{"id": "call1"}},
			"metadata":    map[string]any{"type": "tool.call", "author_id": "agent-7", "step_id": "s1"},
			"ttl_seconds": 3600,
		},
		map[string]any{"content": map[string]any{"x": 1}, "tool_call_id": "call1",
			"metadata": map[string]any{"type": "myapp.result", "role": "tool"}},
	)
	if got := apitest.IDs(stored); got[0] != "a" || got[1] != "b" {
		t.Fatalf("ids = %v", got)
	}
	if id, err := uuid.Parse(apitest.IDs(stored)[2]); err != nil || id.Version() != 7 {
		t.Fatalf("generated id %q is not a UUIDv7", apitest.IDs(stored)[2])
	}
	var c map[string]any
	h.Do("GET", "/projects/p1/cards/b", nil).Want(t, 200).JSON(t, &c)
	for k, want := range map[string]any{
		"card_id": "b", "project_id": "p1", "type": "tool.call", "role": "assistant",
		"author_id": "agent-7", "ttl_seconds": 3600.0, "content": nil, "tool_call_id": nil,
	} {
		if c[k] != want {
			t.Errorf("%s = %v, want %v", k, c[k], want)
		}
	}
	if c["expires_at"] == nil || c["metadata"].(map[string]any)["step_id"] != "s1" {
		t.Errorf("card = %v", c)
	}
	// A bare card object is accepted too.
	var bare struct{ Cards []map[string]any }
	h.Do("POST", "/projects/p1/cards", apitest.Card("d", "agent.thought", "hmm")).Want(t, 201).JSON(t, &bare)
	if len(bare.Cards) != 1 || bare.Cards[0]["role"] != "assistant" {
		t.Fatalf("bare = %v", bare)
	}
	e := h.Do("GET", "/projects/p1/cards/zz", nil).Want(t, 404).APIError(t)
	if e.Status != 404 || e.Kind != "NOT_FOUND" || !strings.Contains(e.Message, "zz") {
		t.Errorf("error = %+v", e)
	}
}

func TestCardValidation(t *testing.T) {
	h := apitest.NewCardBox(t)
	// A bare card's fields are named as sent; a batch's with their index.
	tests := []struct {
		name  string
		body  any
		field string
	}{
		{"no metadata", map[string]any{"card_id": "x", "content": "c"}, "metadata"},
		{"no type", map[string]any{"metadata": map[string]any{"role": "user"}}, "metadata.type"},
		{"type not namespaced", apitest.Card("x", "note", "c"), "metadata.type"},
		{"type with space", apitest.Card("x", "my app.note", "c"), "metadata.type"},
		{"custom type without role", apitest.Card("x", "myapp.note", "c"), "metadata.role"},
		{"bad role", map[string]any{"metadata": map[string]any{"type": "task.instruction", "role": "bot"}}, "metadata.role"},
		{"role not a string", map[string]any{"metadata": map[string]any{"type": "task.instruction", "role": 1}}, "metadata.role"},
		{"metadata not an object", map[string]any{"metadata": "x"}, "metadata"},
		{"retired meta", map[string]any{"meta": map[string]any{"type": "task.instruction"}}, "meta"},
		{"tool_calls not an array", map[string]any{"tool_calls": "x", "metadata": map[string]any{"type": "tool.call"}}, "tool_calls"},
		{"negative ttl", map[string]any{"ttl_seconds": -1, "metadata": map[string]any{"type": "tool.call"}}, "ttl_seconds"},
		{"card id with slash", apitest.Card("a/b", "task.instruction", "c"), "card_id"},
		{"second card bad", map[string]any{"cards": []any{apitest.Card("ok", "task.instruction", "c"), apitest.Card("y", "bad", "c")}}, "cards[1].metadata.type"},
		{"no cards", map[string]any{"cards": []any{}}, "cards"},
		{"too many cards", map[string]any{"cards": manyCards(101)}, "cards"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := h.Do("POST", "/projects/p1/cards", tt.body).Want(t, 400).APIError(t)
			if e.Details["field"] != tt.field || !strings.HasPrefix(e.Message, tt.field+":") {
				t.Errorf("error = %+v, want field %s", e, tt.field)
			}
		})
	}
	// Nothing of a failed batch was written.
	h.Do("GET", "/projects/p1/cards/ok", nil).Want(t, 404)
}

func manyCards(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = apitest.Card(fmt.Sprint("c", i), "task.instruction", "x")
	}
	return out
}

func TestMalformedJSON(t *testing.T) {
	h := apitest.NewCardBox(t)
	tests := []struct {
		name, path, body, field string
	}{
		{"syntax in a card", "/projects/p1/cards", `{"cards":[{"card_id":"a","metadata":{"type":"task.instruction",}}]}`, "cards[0].metadata.type"},
		{"string for integer", "/projects/p1/cards", `{"cards":[{"card_id":"a"},{"ttl_seconds":"60"}]}`, "cards[1].ttl_seconds"},
		{"string for list", "/projects/p1/cards/batch", `{"card_ids":"a"}`, "card_ids"},
		{"number in list", "/projects/p1/boxes/batch", `{"box_ids":["a",7]}`, "box_ids[1]"},
		{"bool for hydrate", "/projects/p1/boxes/batch", `{"box_ids":[],"hydrate":"yes"}`, "hydrate"},
		{"truncated", "/projects/p1/boxes/b/append", `{"card_ids":["a"`, "card_ids[0]"},
		{"empty", "/projects/p1/boxes", ``, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := h.Do("POST", tt.path, tt.body).Want(t, 400).APIError(t)
			if tt.field != "" && (e.Details["field"] != tt.field || !strings.Contains(e.Message, `"`+tt.field+`"`)) {
				t.Errorf("error = %+v, want field %s", e, tt.field)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	h := apitest.NewCardBox(t)
	big := `{"cards":[{"content":"` + strings.Repeat("x", apitest.BodyLimit) + `","metadata":{"type":"task.instruction"}}]}`
	for _, path := range []string{"/projects/p1/cards", "/projects/p1/cards/batch", "/projects/p1/boxes/b/append"} {
		e := h.Do("POST", path, big).Want(t, 413).APIError(t)
		if e.Kind != "PAYLOAD_TOO_LARGE" {
			t.Errorf("%s: %+v", path, e)
		}
	}
	e := h.Do("PUT", "/projects/p1/boxes/b", big).Want(t, 413).APIError(t)
	if e.Status != 413 {
		t.Errorf("PUT: %+v", e)
	}
}

func TestReplayConflictAndDeletedReplay(t *testing.T) {
	h := apitest.NewCardBox(t)
	first := h.AddCards("p1", apitest.Card("a", "task.instruction", "hello"))
	h.Clk.Add(time.Minute)
	// The same card again (role spelled out): a no-op success.
	same := apitest.Card("a", "task.instruction", "hello")
	same["metadata"].(map[string]any)["role"] = "user"
	again := h.AddCards("p1", same)
	if again[0]["created_at"] != first[0]["created_at"] {
		t.Errorf("replay changed created_at: %v -> %v", first[0]["created_at"], again[0]["created_at"])
	}
	// Different content: 409, and the batch's other card is not written.
	e := h.Do("POST", "/projects/p1/cards", map[string]any{"cards": []any{
		apitest.Card("b", "task.instruction", "new"), apitest.Card("a", "task.instruction", "changed"),
	}}).Want(t, 409).APIError(t)
	if e.Kind != "CONFLICT" || fmt.Sprint(e.Details["card_ids"]) != "[a]" {
		t.Errorf("conflict = %+v", e)
	}
	h.Do("GET", "/projects/p1/cards/b", nil).Want(t, 404)
	// The same id twice in one request is invalid (TestRepeatedIDsInOneWrite).
	// A replay of a deleted card does not revive it.
	h.Do("DELETE", "/projects/p1/cards/a", nil).Want(t, 204)
	h.Do("DELETE", "/projects/p1/cards/a", nil).Want(t, 204)
	replayed := h.AddCards("p1", apitest.Card("a", "task.instruction", "hello"))
	if replayed[0]["deleted_at"] == nil {
		t.Errorf("replay of a deleted card = %v", replayed[0])
	}
	h.Do("GET", "/projects/p1/cards/a", nil).Want(t, 404)
	h.Do("DELETE", "/projects/p1/cards/never", nil).Want(t, 404)
}

func TestCardsBatch(t *testing.T) {
	h := apitest.NewCardBox(t)
	h.Notes("p1", "n", 5)
	h.Do("DELETE", "/projects/p1/cards/n1", nil).Want(t, 204)
	var res struct {
		Cards      []map[string]any
		MissingIDs []string `json:"missing_ids"`
	}
	h.Do("POST", "/projects/p1/cards/batch", map[string]any{
		"card_ids": []string{"n3", "n0", "nope", "n3", "n1", "n4", "nope"},
	}).Want(t, 200).JSON(t, &res)
	if got := apitest.IDs(res.Cards); !slices.Equal(got, []string{"n3", "n0", "n4"}) {
		t.Errorf("cards = %v", got)
	}
	if !slices.Equal(res.MissingIDs, []string{"nope", "n1"}) {
		t.Errorf("missing = %v", res.MissingIDs)
	}
	// Empty and absent lists are empty answers.
	h.Do("POST", "/projects/p1/cards/batch", `{}`).Want(t, 200).JSON(t, &res)
	if len(res.Cards) != 0 || res.MissingIDs == nil {
		t.Errorf("empty = %+v", res)
	}
	// 100 ids is the limit.
	hundred := make([]string, 101)
	for i := range hundred {
		hundred[i] = fmt.Sprint("x", i)
	}
	h.Do("POST", "/projects/p1/cards/batch", map[string]any{"card_ids": hundred[:100]}).Want(t, 200)
	for _, path := range []string{"/projects/p1/cards/batch", "/projects/p1/boxes/batch"} {
		key := "card_ids"
		if strings.Contains(path, "boxes") {
			key = "box_ids"
		}
		e := h.Do("POST", path, map[string]any{key: hundred}).Want(t, 400).APIError(t)
		if !strings.Contains(e.Message, "at most 100") {
			t.Errorf("%s: %+v", path, e)
		}
	}
}

func TestExpiredCardsAreMissing(t *testing.T) {
	h := apitest.NewCardBox(t)
	short := apitest.Card("short", "task.instruction", "x")
	short["ttl_seconds"] = 60
	h.AddCards("p1", short, apitest.Card("long", "task.instruction", "y"))
	h.Do("PUT", "/projects/p1/boxes/b", map[string]any{"card_ids": []string{"short", "long"}}).Want(t, 200)
	h.Do("GET", "/projects/p1/cards/short", nil).Want(t, 200)
	h.Clk.Add(61 * time.Second)
	h.Do("GET", "/projects/p1/cards/short", nil).Want(t, 404)
	var batch struct {
		MissingIDs []string `json:"missing_ids"`
	}
	h.Do("POST", "/projects/p1/cards/batch", map[string]any{"card_ids": []string{"short", "long"}}).Want(t, 200).JSON(t, &batch)
	if !slices.Equal(batch.MissingIDs, []string{"short"}) {
		t.Errorf("missing = %v", batch.MissingIDs)
	}
	var page []map[string]any
	h.Do("GET", "/projects/p1/boxes/b/cards", nil).Want(t, 200).JSON(t, &page)
	if !slices.Equal(apitest.IDs(page), []string{"long"}) {
		t.Errorf("box cards = %v", apitest.IDs(page))
	}
	var boxes struct {
		MissingCardIDs []string `json:"missing_card_ids"`
	}
	h.Do("POST", "/projects/p1/boxes/batch", map[string]any{"box_ids": []string{"b"}, "hydrate": true}).Want(t, 200).JSON(t, &boxes)
	if !slices.Equal(boxes.MissingCardIDs, []string{"short"}) {
		t.Errorf("missing_card_ids = %v", boxes.MissingCardIDs)
	}
	// An expired card cannot be put in a box.
	h.Do("POST", "/projects/p1/boxes/b/append", map[string]any{"card_ids": []string{"short"}}).Want(t, 422)
}

type boxBody struct {
	BoxID         string           `json:"box_id"`
	CardIDs       []string         `json:"card_ids"`
	ParentIDs     []string         `json:"parent_ids"`
	Metadata      map[string]any   `json:"metadata"`
	HydratedCards []map[string]any `json:"hydrated_cards"`
}

func TestBoxes(t *testing.T) {
	h := apitest.NewCardBox(t)
	h.Notes("p1", "n", 4)
	var b boxBody
	h.Do("PUT", "/projects/p1/boxes/ctx", map[string]any{
		"card_ids": []string{"n0", "n1"}, "parent_ids": []string{"older"}, "metadata": map[string]any{"agent": "a1"},
	}).Want(t, 200).JSON(t, &b)
	if b.BoxID != "ctx" || !slices.Equal(b.ParentIDs, []string{"older"}) || b.Metadata["agent"] != "a1" {
		t.Errorf("box = %+v", b)
	}
	h.Do("POST", "/projects/p1/boxes/ctx/append", map[string]any{"card_ids": []string{"n2", "n0"}}).Want(t, 200).JSON(t, &b)
	h.Do("GET", "/projects/p1/boxes/ctx", nil).Want(t, 200).JSON(t, &b)
	if !slices.Equal(b.CardIDs, []string{"n0", "n1", "n2", "n0"}) {
		t.Errorf("card_ids = %v", b.CardIDs)
	}
	// Replace.
	h.Do("PUT", "/projects/p1/boxes/ctx", map[string]any{"card_ids": []string{"n3"}}).Want(t, 200).JSON(t, &b)
	if !slices.Equal(b.CardIDs, []string{"n3"}) || len(b.ParentIDs) != 0 {
		t.Errorf("replaced = %+v", b)
	}
	// Create with a generated id.
	h.Do("POST", "/projects/p1/boxes", map[string]any{"card_ids": []string{"n1"}}).Want(t, 201).JSON(t, &b)
	if id, err := uuid.Parse(b.BoxID); err != nil || id.Version() != 7 {
		t.Errorf("generated box id %q", b.BoxID)
	}
	// Unknown cards: 422 naming them; nothing changes.
	for _, req := range []struct{ method, path string }{
		{"PUT", "/projects/p1/boxes/ctx"}, {"POST", "/projects/p1/boxes"}, {"POST", "/projects/p1/boxes/ctx/append"},
	} {
		e := h.Do(req.method, req.path, map[string]any{"card_ids": []string{"n1", "ghost", "ghost2"}}).Want(t, 422).APIError(t)
		if e.Kind != "UNPROCESSABLE" || fmt.Sprint(e.Details["card_ids"]) != "[ghost ghost2]" {
			t.Errorf("%s %s: %+v", req.method, req.path, e)
		}
	}
	h.Do("GET", "/projects/p1/boxes/ctx", nil).Want(t, 200).JSON(t, &b)
	if !slices.Equal(b.CardIDs, []string{"n3"}) {
		t.Errorf("after 422: %v", b.CardIDs)
	}
	// Appending to an unknown box is 404, even with unknown cards.
	h.Do("POST", "/projects/p1/boxes/nobox/append", map[string]any{"card_ids": []string{"n1"}}).Want(t, 404)
	h.Do("POST", "/projects/p1/boxes/nobox/append", map[string]any{"card_ids": []string{"ghost"}}).Want(t, 404)
	h.Do("POST", "/projects/p1/boxes/ctx/append", map[string]any{"card_ids": []string{}}).Want(t, 400)
	// Soft delete.
	h.Do("DELETE", "/projects/p1/boxes/ctx", nil).Want(t, 204)
	h.Do("GET", "/projects/p1/boxes/ctx", nil).Want(t, 404)
	h.Do("GET", "/projects/p1/boxes/ctx/cards", nil).Want(t, 404)
	h.Do("POST", "/projects/p1/boxes/ctx/append", map[string]any{"card_ids": []string{"n1"}}).Want(t, 404)
	h.Do("DELETE", "/projects/p1/boxes/never", nil).Want(t, 404)
	// Saving a deleted box's id creates it anew.
	h.Do("PUT", "/projects/p1/boxes/ctx", map[string]any{"card_ids": []string{"n2"}}).Want(t, 200)
	h.Do("GET", "/projects/p1/boxes/ctx", nil).Want(t, 200).JSON(t, &b)
	if !slices.Equal(b.CardIDs, []string{"n2"}) {
		t.Errorf("recreated = %v", b.CardIDs)
	}
	// Ids are percent-decoded.
	h.AddCards("p1", apitest.Card("a:b", "task.instruction", "x"), apitest.Card("ü%", "task.instruction", "y"))
	h.Do("GET", "/projects/p1/cards/a%3Ab", nil).Want(t, 200)
	h.Do("GET", "/projects/p1/cards/%C3%BC%25", nil).Want(t, 200)
}

func TestBoxesBatch(t *testing.T) {
	h := apitest.NewCardBox(t)
	cardIDs := h.Notes("p1", "n", 600)
	h.Do("PUT", "/projects/p1/boxes/big", map[string]any{"card_ids": cardIDs}).Want(t, 200)
	h.Do("PUT", "/projects/p1/boxes/small", map[string]any{"card_ids": []string{"n1", "n2", "n3"}}).Want(t, 200)
	h.Do("PUT", "/projects/p1/boxes/gone", map[string]any{"card_ids": []string{"n1"}}).Want(t, 200)
	h.Do("DELETE", "/projects/p1/boxes/gone", nil).Want(t, 204)
	h.Do("DELETE", "/projects/p1/cards/n2", nil).Want(t, 204)
	type batch struct {
		Boxes          []boxBody
		MissingBoxIDs  []string `json:"missing_box_ids"`
		MissingCardIDs []string `json:"missing_card_ids"`
	}
	tests := []struct {
		name     string
		req      map[string]any
		boxes    []string
		hydrated []int // len(hydrated_cards) per box, nil when not hydrated
		missing  []string
	}{
		{"plain", map[string]any{"box_ids": []string{"small", "x", "big", "small", "gone"}}, []string{"small", "big"}, nil, nil},
		{"hydrate default limit", map[string]any{"box_ids": []string{"big", "small"}, "hydrate": true}, []string{"big", "small"}, []int{200, 2}, []string{"n2"}},
		{"hydrate limit 2", map[string]any{"box_ids": []string{"small"}, "hydrate": true, "limit": 2}, []string{"small"}, []int{1}, []string{"n2"}},
		{"limit clamped up", map[string]any{"box_ids": []string{"small"}, "hydrate": true, "limit": 0}, []string{"small"}, []int{1}, nil},
		{"limit clamped down", map[string]any{"box_ids": []string{"big"}, "hydrate": true, "limit": 1000}, []string{"big"}, []int{500}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res batch
			h.Do("POST", "/projects/p1/boxes/batch", tt.req).Want(t, 200).JSON(t, &res)
			var got []string
			for i, b := range res.Boxes {
				got = append(got, b.BoxID)
				if tt.hydrated == nil && b.HydratedCards != nil {
					t.Errorf("%s hydrated without hydrate", b.BoxID)
				}
				if tt.hydrated != nil && len(b.HydratedCards) != tt.hydrated[i] {
					t.Errorf("%s: %d hydrated cards, want %d", b.BoxID, len(b.HydratedCards), tt.hydrated[i])
				}
			}
			if !slices.Equal(got, tt.boxes) {
				t.Errorf("boxes = %v, want %v", got, tt.boxes)
			}
			if tt.req["hydrate"] == nil && !slices.Equal(res.MissingBoxIDs, []string{"x", "gone"}) {
				t.Errorf("missing_box_ids = %v", res.MissingBoxIDs)
			}
			if len(tt.missing) > 0 && !slices.Equal(res.MissingCardIDs, tt.missing) {
				t.Errorf("missing_card_ids = %v, want %v", res.MissingCardIDs, tt.missing)
			}
		})
	}
	// Hydrated cards are the box's last ones, in box order.
	var res batch
	h.Do("POST", "/projects/p1/boxes/batch", map[string]any{"box_ids": []string{"big"}, "hydrate": true, "limit": 3}).Want(t, 200).JSON(t, &res)
	if got := apitest.IDs(res.Boxes[0].HydratedCards); !slices.Equal(got, []string{"n597", "n598", "n599"}) {
		t.Errorf("hydrated = %v", got)
	}
}

func TestBoxCardsPaging(t *testing.T) {
	h := apitest.NewCardBox(t)
	cardIDs := h.Notes("p1", "n", 7)
	h.Do("PUT", "/projects/p1/boxes/b", map[string]any{"card_ids": cardIDs}).Want(t, 200)
	var pages [][]string
	cursor := ""
	for range 5 {
		res := h.Do("GET", "/projects/p1/boxes/b/cards?limit=3&cursor="+cursor, nil).Want(t, 200)
		var page []map[string]any
		res.JSON(t, &page)
		pages = append(pages, apitest.IDs(page))
		if cursor = res.Header.Get("X-Next-Cursor"); cursor == "" {
			break
		}
	}
	want := [][]string{{"n4", "n5", "n6"}, {"n1", "n2", "n3"}, {"n0"}}
	if fmt.Sprint(pages) != fmt.Sprint(want) {
		t.Errorf("pages = %v, want %v", pages, want)
	}
	// Defaults and clamping.
	var all []map[string]any
	h.Do("GET", "/projects/p1/boxes/b/cards", nil).Want(t, 200).JSON(t, &all)
	if len(all) != 7 {
		t.Errorf("default page has %d cards", len(all))
	}
	res := h.Do("GET", "/projects/p1/boxes/b/cards?limit=0", nil).Want(t, 200)
	res.JSON(t, &all)
	if len(all) != 1 || res.Header.Get("X-Next-Cursor") != "6" {
		t.Errorf("limit=0: %d cards, cursor %q", len(all), res.Header.Get("X-Next-Cursor"))
	}
	for _, q := range []string{"limit=abc", "cursor=-1", "cursor=zz"} {
		h.Do("GET", "/projects/p1/boxes/b/cards?"+q, nil).Want(t, 400)
	}
	h.Do("GET", "/projects/p1/boxes/nope/cards", nil).Want(t, 404)
}

func TestTenancy(t *testing.T) {
	h := apitest.NewCardBox(t)
	// The same ids in two projects are two cards.
	h.AddCards("alpha", apitest.Card("shared", "task.instruction", "alpha's"), apitest.Card("only-alpha", "task.instruction", "a"))
	h.AddCards("beta", apitest.Card("shared", "task.instruction", "beta's"))
	for project, want := range map[string]string{"alpha": "alpha's", "beta": "beta's"} {
		var c map[string]any
		h.Do("GET", "/projects/"+project+"/cards/shared", nil).Want(t, 200).JSON(t, &c)
		if c["content"] != want || c["project_id"] != project {
			t.Errorf("%s sees %v", project, c)
		}
	}
	h.Do("GET", "/projects/beta/cards/only-alpha", nil).Want(t, 404)
	var batch struct {
		MissingIDs []string `json:"missing_ids"`
	}
	h.Do("POST", "/projects/beta/cards/batch", map[string]any{"card_ids": []string{"only-alpha", "shared"}}).Want(t, 200).JSON(t, &batch)
	if !slices.Equal(batch.MissingIDs, []string{"only-alpha"}) {
		t.Errorf("beta missing = %v", batch.MissingIDs)
	}
	// Beta cannot reference alpha's cards, nor delete them.
	h.Do("PUT", "/projects/beta/boxes/box", map[string]any{"card_ids": []string{"only-alpha"}}).Want(t, 422)
	h.Do("DELETE", "/projects/beta/cards/only-alpha", nil).Want(t, 404)
	h.Do("GET", "/projects/alpha/cards/only-alpha", nil).Want(t, 200)
	// Same box id in both projects.
	h.Do("PUT", "/projects/alpha/boxes/box", map[string]any{"card_ids": []string{"shared", "only-alpha"}}).Want(t, 200)
	h.Do("PUT", "/projects/beta/boxes/box", map[string]any{"card_ids": []string{"shared"}}).Want(t, 200)
	h.Do("POST", "/projects/beta/boxes/box/append", map[string]any{"card_ids": []string{"shared"}}).Want(t, 200)
	var a, b boxBody
	h.Do("GET", "/projects/alpha/boxes/box", nil).Want(t, 200).JSON(t, &a)
	h.Do("GET", "/projects/beta/boxes/box", nil).Want(t, 200).JSON(t, &b)
	if len(a.CardIDs) != 2 || len(b.CardIDs) != 2 || a.CardIDs[1] != "only-alpha" {
		t.Errorf("alpha box %v, beta box %v", a.CardIDs, b.CardIDs)
	}
	var page []map[string]any
	h.Do("GET", "/projects/beta/boxes/box/cards", nil).Want(t, 200).JSON(t, &page)
	if len(page) != 2 || page[0]["content"] != "beta's" {
		t.Errorf("beta box cards = %v", page)
	}
	h.Do("DELETE", "/projects/beta/boxes/box", nil).Want(t, 204)
	h.Do("GET", "/projects/alpha/boxes/box", nil).Want(t, 200)
	// Reads of a project that was never written find nothing.
	h.Do("GET", "/projects/gamma/boxes/box", nil).Want(t, 404)
}

func TestConcurrentAppends(t *testing.T) {
	h := apitest.NewCardBox(t)
	const workers, each = 16, 10
	cardIDs := h.Notes("p1", "n", workers*each)
	h.Do("PUT", "/projects/p1/boxes/b", map[string]any{"card_ids": []string{}}).Want(t, 200)
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				_, err := h.Try("POST", "/projects/p1/boxes/b/append", map[string]any{
					"card_ids": []string{cardIDs[w*each+i]},
				}, 200)
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	var b boxBody
	h.Do("GET", "/projects/p1/boxes/b", nil).Want(t, 200).JSON(t, &b)
	got := slices.Clone(b.CardIDs)
	slices.Sort(got)
	want := slices.Clone(cardIDs)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("box has %d ids, want %d", len(got), len(want))
	}
}

// The sweeper purges an expired card and one deleted longer ago than the
// retention; their ids are free again. The pass runs on the test's
// goroutine. The server's own sweeper shares the clock and makes its first
// pass when the server starts, which on a busy machine may read the clock
// after the test moved it: it may then purge the expired card first (not
// the deleted one: its retention is a week), or while the write below
// runs, which must succeed all the same.
func TestSweeperPurges(t *testing.T) {
	h := apitest.NewCardBox(t)
	short := apitest.Card("short", "task.instruction", "x")
	short["ttl_seconds"] = 1
	h.AddCards("p1", short, apitest.Card("del", "task.instruction", "y"))
	h.Do("DELETE", "/projects/p1/cards/del", nil).Want(t, 204)
	h.Clk.Add(2 * time.Hour)
	st, err := h.Svc.NewSweeper(sweep.Config{DeletedRetention: time.Hour}).Sweep(context.Background())
	if err != nil || st.Cards < 1 || st.Cards > 2 {
		t.Fatalf("Sweep = %+v, %v; want the deleted card purged, and the expired one unless the server's sweeper did", st, err)
	}
	// Once purged, the ids are free: new content is no conflict.
	h.Do("POST", "/projects/p1/cards", map[string]any{"cards": []any{
		apitest.Card("short", "task.instruction", "new"), apitest.Card("del", "task.instruction", "new"),
	}}).Want(t, 201)
}

func TestConcurrentFirstWrites(t *testing.T) {
	h := apitest.NewCardBox(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for w := range 8 {
		wg.Go(func() {
			_, errs[w] = h.Try("POST", "/projects/fresh/cards", apitest.Card(fmt.Sprint("c", w), "task.instruction", "x"), 201)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
