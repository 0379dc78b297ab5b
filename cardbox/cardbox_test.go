package cardbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/cardbox/sweep"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testStart is where the tests' clocks start.
var testStart = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newService(t *testing.T) (*cardbox.Service, *testkit.Clock) {
	t.Helper()
	clk := testkit.NewClock(testStart)
	return cardbox.New(pgtest.Tx(t), cardbox.Options{Now: clk.Now}), clk
}

func note(id, text string) cardbox.NewCard {
	content, _ := json.Marshal(text)
	return cardbox.NewCard{
		CardID:   id,
		Content:  content,
		Metadata: json.RawMessage(`{"type":"task.instruction","author_id":"u1"}`),
	}
}

func TestAddCardsReplayAndConflict(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	first, err := s.AddCards(ctx, "p1", []cardbox.NewCard{note("a", "hello"), note("b", "world")})
	if err != nil {
		t.Fatal(err)
	}
	if first[0].Role != rules.RoleUser || first[0].Type != "task.instruction" || first[0].AuthorID != "u1" {
		t.Fatalf("card a = %+v", first[0])
	}
	// Same content with other JSON spelling: a replay.
	replay := note("a", "hello")
	replay.Metadata = json.RawMessage(`{ "author_id": "u1", "role": "user", "type": "task.instruction" }`)
	again, err := s.AddCards(ctx, "p1", []cardbox.NewCard{replay})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if !again[0].CreatedAt.Equal(first[0].CreatedAt) {
		t.Fatalf("replay changed created_at")
	}
	// Different content: conflict, and nothing of the batch is written.
	_, err = s.AddCards(ctx, "p1", []cardbox.NewCard{note("c", "new"), note("a", "changed")})
	var ce *rules.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, rules.ErrConflict) || ce.CardIDs[0] != "a" {
		t.Fatalf("conflict: %v", err)
	}
	if _, err := s.GetCardJSONWithin(ctx, "p1", "c", unlimited); !errors.Is(err, rules.ErrNotFound) {
		t.Fatalf("card c written by a failed batch: %v", err)
	}
}

func TestNullsAndGeneratedIDs(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	added, err := s.AddCards(ctx, "p1", []cardbox.NewCard{{
		Metadata: json.RawMessage(`{"type":"tool.call"}`), ToolCalls: json.RawMessage(`[{"id":"x"}]`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := added[0]
	if len(c.CardID) != 36 || c.Content != nil || string(c.ToolCalls) != `[{"id": "x"}]` {
		t.Fatalf("card = %+v %s", c, c.ToolCalls)
	}
	// Replaying it with explicit nulls is the same card.
	if _, err := s.AddCards(ctx, "p1", []cardbox.NewCard{{
		CardID: c.CardID, Content: json.RawMessage("null"),
		Metadata: json.RawMessage(`{"type":"tool.call","role":"assistant"}`), ToolCalls: json.RawMessage(`[{"id": "x"}]`),
	}}); err != nil {
		t.Fatal(err)
	}
}

func TestExpiryDeletionAndSweep(t *testing.T) {
	ctx := context.Background()
	s, clk := newService(t)
	short := note("short", "x")
	short.TTLSeconds = 60
	if _, err := s.AddCards(ctx, "p1", []cardbox.NewCard{short, note("gone", "y"), note("kept", "z")}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCard(ctx, "p1", "gone"); err != nil {
		t.Fatal(err)
	}
	clk.Add(61 * time.Second)
	res, err := s.GetCardsJSONWithin(ctx, "p1", []string{"short", "gone", "kept"}, unlimited)
	if err != nil {
		t.Fatal(err)
	}
	if ids := jsonIDs(t, res.Cards); !slices.Equal(ids, []string{"kept"}) || len(res.MissingIDs) != 2 {
		t.Fatalf("res = %+v", res)
	}
	// A replay of the deleted card does not revive it.
	if _, err := s.AddCards(ctx, "p1", []cardbox.NewCard{note("gone", "y")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCardJSONWithin(ctx, "p1", "gone", unlimited); !errors.Is(err, rules.ErrNotFound) {
		t.Fatalf("revived: %v", err)
	}
	sw := s.NewSweeper(sweep.Config{DeletedRetention: time.Hour, BatchSize: 1})
	st, err := sw.Sweep(ctx)
	if err != nil || st.Cards != 1 {
		t.Fatalf("sweep 1 = %+v, %v", st, err)
	}
	clk.Add(2 * time.Hour)
	if err := s.DeleteBox(ctx, "p1", "nope"); !errors.Is(err, rules.ErrNotFound) {
		t.Fatal(err)
	}
	st, err = sw.Sweep(ctx)
	if err != nil || st.Cards != 1 {
		t.Fatalf("sweep 2 = %+v, %v", st, err)
	}
	// Purged: the id can be written afresh.
	if _, err := s.AddCards(ctx, "p1", []cardbox.NewCard{note("gone", "new content")}); err != nil {
		t.Fatal(err)
	}
}

func TestBoxes(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	if _, err := s.AddCards(ctx, "p1", []cardbox.NewCard{note("a", "1"), note("b", "2"), note("c", "3")}); err != nil {
		t.Fatal(err)
	}
	b, err := s.SaveBox(ctx, "p1", "box", cardbox.BoxInput{CardIDs: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(b.Metadata) != "{}" || len(b.ParentIDs) != 0 {
		t.Fatalf("box = %+v", b)
	}
	appended, err := s.AppendToBox(ctx, "p1", "box", []string{"c", "a"})
	if err != nil || appended.Length != 4 || appended.Cursor() != "4" {
		t.Fatalf("append = %+v, %v", appended, err)
	}
	_, err = s.AppendToBox(ctx, "p1", "box", []string{"zz"})
	var ue *rules.UnknownCardsError
	if !errors.As(err, &ue) || ue.CardIDs[0] != "zz" {
		t.Fatalf("unknown: %v", err)
	}
	if _, err := s.AppendToBox(ctx, "p1", "nobox", []string{"zz"}); !errors.Is(err, rules.ErrNotFound) {
		t.Fatalf("unknown box: %v", err)
	}
	page, err := s.BoxCardsJSONWithin(ctx, "p1", "box", 3, "", unlimited)
	if err != nil || len(page.Cards) != 3 || page.NextCursor != "1" || jsonIDs(t, page.Cards)[0] != "b" {
		t.Fatalf("page = %+v, %v", page, err)
	}
	page, err = s.BoxCardsJSONWithin(ctx, "p1", "box", 3, page.NextCursor, unlimited)
	if err != nil || len(page.Cards) != 1 || page.NextCursor != "" || jsonIDs(t, page.Cards)[0] != "a" {
		t.Fatalf("page 2 = %+v, %v", page, err)
	}
	res, err := s.GetBoxesJSONWithin(ctx, "p1", cardbox.BoxesQuery{BoxIDs: []string{"x", "box", "box"}, Hydrate: true, Limit: 2}, unlimited)
	if err != nil || len(res.Boxes) != 1 || len(res.Boxes[0].Cards) != 2 || res.MissingBoxIDs[0] != "x" {
		t.Fatalf("boxes = %+v, %v", res, err)
	}
}
