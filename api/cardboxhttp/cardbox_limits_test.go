package cardboxhttp_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/cardbox/rules"
)

// repeat returns n copies of id: a box is a list, so one card fills it.
func repeat(id string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = id
	}
	return out
}

func TestBoxLengthLimit(t *testing.T) {
	h := apitest.NewCardBox(t)
	h.AddCards("p1", apitest.Card("a", "task.instruction", "x"))
	for _, req := range []struct{ method, path string }{{"PUT", "/projects/p1/boxes/b"}, {"POST", "/projects/p1/boxes"}} {
		e := h.Do(req.method, req.path, map[string]any{"card_ids": repeat("a", rules.MaxBoxCards+1)}).Want(t, 400).APIError(t)
		if e.Details["field"] != "card_ids" || !strings.Contains(e.Message, "at most 10000") {
			t.Errorf("%s: error = %+v", req.method, e)
		}
	}
	e := h.Do("PUT", "/projects/p1/boxes/b", map[string]any{
		"card_ids": []string{"a"}, "parent_ids": distinct("p", rules.MaxBoxParents+1),
	}).Want(t, 400).APIError(t)
	if e.Details["field"] != "parent_ids" || !strings.Contains(e.Message, "at most 1000") {
		t.Errorf("parents: error = %+v", e)
	}
	h.Do("PUT", "/projects/p1/boxes/b", map[string]any{"card_ids": repeat("a", rules.MaxBoxCards-1)}).Want(t, 200)
	h.Do("POST", "/projects/p1/boxes/b/append", map[string]any{"card_ids": []string{"a"}}).Want(t, 200)
	// A full box refuses an append, which changes nothing.
	e = h.Do("POST", "/projects/p1/boxes/b/append", map[string]any{"card_ids": []string{"a"}}).Want(t, 400).APIError(t)
	if e.Details["field"] != "card_ids" || !strings.Contains(e.Message, "at most 10000") {
		t.Errorf("append: error = %+v", e)
	}
	var b boxBody
	h.Do("GET", "/projects/p1/boxes/b", nil).Want(t, 200).JSON(t, &b)
	if len(b.CardIDs) != rules.MaxBoxCards {
		t.Errorf("box holds %d ids, want %d", len(b.CardIDs), rules.MaxBoxCards)
	}
	// An unknown box is still 404, full or not.
	h.Do("POST", "/projects/p1/boxes/nobox/append", map[string]any{"card_ids": []string{"a"}}).Want(t, 404)
}

// distinct returns n distinct ids with prefix.
func distinct(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

func TestMetadataSizeLimit(t *testing.T) {
	h := apitest.NewCardBoxWith(t, apitest.CardBoxOptions{BodyLimit: 1 << 20})
	h.AddCards("p1", apitest.Card("a", "task.instruction", "x"))
	pad := func(n int) map[string]any {
		return map[string]any{"type": "task.instruction", "pad": strings.Repeat("x", n)}
	}
	// Just under the limit is stored.
	h.Do("POST", "/projects/p1/cards", map[string]any{"card_id": "fits", "metadata": pad(rules.MaxMetadataBytes - 100)}).Want(t, 201)
	h.Do("PUT", "/projects/p1/boxes/fits", map[string]any{"card_ids": []string{"a"}, "metadata": pad(rules.MaxMetadataBytes - 100)}).Want(t, 200)
	for _, tt := range []struct {
		method, path string
		body         map[string]any
		field        string
	}{
		{"POST", "/projects/p1/cards", map[string]any{"card_id": "big", "metadata": pad(rules.MaxMetadataBytes)}, "metadata"},
		{"POST", "/projects/p1/cards", map[string]any{"cards": []any{map[string]any{"card_id": "big", "metadata": pad(rules.MaxMetadataBytes)}}}, "cards[0].metadata"},
		{"PUT", "/projects/p1/boxes/big", map[string]any{"card_ids": []string{"a"}, "metadata": pad(rules.MaxMetadataBytes)}, "metadata"},
	} {
		e := h.Do(tt.method, tt.path, tt.body).Want(t, 400).APIError(t)
		if e.Details["field"] != tt.field || !strings.Contains(e.Message, "65536") {
			t.Errorf("%s %s: error = %+v", tt.method, tt.path, e)
		}
	}
	h.Do("GET", "/projects/p1/cards/big", nil).Want(t, 404)
	h.Do("GET", "/projects/p1/boxes/big", nil).Want(t, 404)
}

// appendBody is the answer of an append.
type appendBody struct {
	BoxID     string `json:"box_id"`
	ProjectID string `json:"project_id"`
	Length    int    `json:"length"`
	Cursor    string `json:"cursor"`
	UpdatedAt string `json:"updated_at"`
}

func TestAppendAnswersLengthAndCursor(t *testing.T) {
	h := apitest.NewCardBox(t)
	notes := h.Notes("p1", "n", 6)
	h.Do("PUT", "/projects/p1/boxes/b", map[string]any{"card_ids": notes[:2]}).Want(t, 200)
	var a appendBody
	h.Do("POST", "/projects/p1/boxes/b/append", map[string]any{"card_ids": notes[2:4]}).Want(t, 200).JSON(t, &a)
	if a.BoxID != "b" || a.ProjectID != "p1" || a.Length != 4 || a.Cursor != "4" || a.UpdatedAt == "" {
		t.Fatalf("append answer = %+v", a)
	}
	// Later appends do not move the cursor's page: it ends with this
	// append's ids.
	h.Do("POST", "/projects/p1/boxes/b/append", map[string]any{"card_ids": notes[4:5]}).Want(t, 200)
	var page []map[string]any
	h.Do("GET", "/projects/p1/boxes/b/cards?limit=2&cursor="+a.Cursor, nil).Want(t, 200).JSON(t, &page)
	if got := apitest.IDs(page); !slices.Equal(got, notes[2:4]) {
		t.Errorf("page at the cursor = %v, want %v", got, notes[2:4])
	}
	// ?return=box answers the whole box, as the append left it.
	var b boxBody
	h.Do("POST", "/projects/p1/boxes/b/append?return=box", map[string]any{"card_ids": notes[5:]}).Want(t, 200).JSON(t, &b)
	if b.BoxID != "b" || !slices.Equal(b.CardIDs, notes) {
		t.Errorf("return=box: %+v", b)
	}
	h.Do("POST", "/projects/p1/boxes/b/append?return=all", map[string]any{"card_ids": notes[:1]}).Want(t, 400)
}

func TestAppendAnswerDoesNotGrowWithTheBox(t *testing.T) {
	h := apitest.NewCardBox(t)
	h.AddCards("p1", apitest.Card("a", "task.instruction", "x"))
	h.Do("PUT", "/projects/p1/boxes/b", map[string]any{"card_ids": repeat("a", rules.MaxBoxCards-1)}).Want(t, 200)
	res := h.Do("POST", "/projects/p1/boxes/b/append", map[string]any{"card_ids": []string{"a"}}).Want(t, 200)
	if len(res.Body) > 256 {
		t.Errorf("append to a full box answered %d bytes: %.300s", len(res.Body), res.Body)
	}
	var a appendBody
	res.JSON(t, &a)
	if a.Length != rules.MaxBoxCards {
		t.Errorf("length = %d", a.Length)
	}
}

func TestPostgresUnavailableIs503(t *testing.T) {
	// Nothing listens on port 1 of the loopback address: every query
	// fails to connect.
	pool, err := pgxpool.New(context.Background(), "postgres://cardbox@127.0.0.1:1/none?connect_timeout=2&sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h := apitest.NewCardBoxRoutesOnly(t, pool)
	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/projects/p1/cards", apitest.Card("a", "task.instruction", "x")},
		{"GET", "/projects/p1/cards/a", nil},
		{"POST", "/projects/p1/cards/batch", map[string]any{"card_ids": []string{"a"}}},
		{"PUT", "/projects/p1/boxes/b", map[string]any{"card_ids": []string{"a"}}},
		{"POST", "/projects/p1/boxes/b/append", map[string]any{"card_ids": []string{"a"}}},
		{"GET", "/projects/p1/boxes/b", nil},
		{"GET", "/projects/p1/boxes/b/cards", nil},
		{"POST", "/projects/p1/boxes/batch", map[string]any{"box_ids": []string{"b"}}},
		{"DELETE", "/projects/p1/cards/a", nil},
		{"DELETE", "/projects/p1/boxes/b", nil},
	} {
		e := h.Do(req.method, req.path, req.body).Want(t, 503).APIError(t)
		if e.Kind != "UNAVAILABLE" {
			t.Errorf("%s %s: error = %+v", req.method, req.path, e)
		}
	}
}
