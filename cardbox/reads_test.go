package cardbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit"
)

// unlimited is a room that never runs out: these tests are of what the
// reads answer, not of their bounds.
func unlimited(int64) error { return nil }

// jsonIDs returns the card_id of each rendered card.
func jsonIDs(t *testing.T, cards []json.RawMessage) []string {
	t.Helper()
	ids := make([]string, len(cards))
	for i, raw := range cards {
		var c struct {
			CardID string `json:"card_id"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatalf("card %s: %v", raw, err)
		}
		ids[i] = c.CardID
	}
	return ids
}

// liveIDs reads ids through every JSON read (batch, single, box page and
// hydrated box) and fails unless each returns exactly want, in order.
func liveIDs(t *testing.T, s *cardbox.Service, project, box string, ids, want []string) {
	t.Helper()
	ctx := context.Background()
	res, err := s.GetCardsJSONWithin(ctx, project, ids, unlimited)
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonIDs(t, res.Cards); !slices.Equal(got, want) {
		t.Errorf("GetCardsJSONWithin = %v, want %v", got, want)
	}
	var single []string
	for _, id := range ids {
		raw, err := s.GetCardJSONWithin(ctx, project, id, unlimited)
		switch {
		case err == nil:
			single = append(single, jsonIDs(t, []json.RawMessage{raw})...)
		case !errors.Is(err, rules.ErrNotFound):
			t.Fatal(err)
		}
	}
	if !slices.Equal(single, want) {
		t.Errorf("GetCardJSONWithin = %v, want %v", single, want)
	}
	page, err := s.BoxCardsJSONWithin(ctx, project, box, cardbox.MaxCardsLimit, "", unlimited)
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonIDs(t, page.Cards); !slices.Equal(got, want) {
		t.Errorf("BoxCardsJSONWithin = %v, want %v", got, want)
	}
	boxes, err := s.GetBoxesJSONWithin(ctx, project, cardbox.BoxesQuery{BoxIDs: []string{box}, Hydrate: true, Limit: 100}, unlimited)
	if err != nil {
		t.Fatal(err)
	}
	if got := jsonIDs(t, boxes.Boxes[0].Cards); !slices.Equal(got, want) {
		t.Errorf("GetBoxesJSONWithin = %v, want %v", got, want)
	}
}

// newPoolService is a Service on a database of its own, which other
// writers (a second Service, plain SQL) share.
func newPoolService(t *testing.T) (*cardbox.Service, *pgxpool.Pool, *testkit.Clock) {
	t.Helper()
	clk := testkit.NewClock(testStart)
	pool := pgtest.NewPool(t)
	return cardbox.New(pool, cardbox.Options{Now: clk.Now}), pool, clk
}

func TestCachedReadsSeeOtherWritersDeletes(t *testing.T) {
	ctx := context.Background()
	s, pool, clk := newPoolService(t)
	ids := []string{"a", "b", "c", "d"}
	var cards []cardbox.NewCard
	for _, id := range ids {
		cards = append(cards, note(id, "text of "+id))
	}
	if _, err := s.AddCards(ctx, "p1", cards); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBox(ctx, "p1", "box", cardbox.BoxInput{CardIDs: ids}); err != nil {
		t.Fatal(err)
	}
	liveIDs(t, s, "p1", "box", ids, ids) // reads, then serves from the cache
	liveIDs(t, s, "p1", "box", ids, ids)

	// Another process's delete, and a plain SQL one.
	other := cardbox.New(pool, cardbox.Options{Now: clk.Now})
	if err := other.DeleteCard(ctx, "p1", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE cards SET deleted_at = now() WHERE tenant_id = 'p1' AND card_id = 'd'`); err != nil {
		t.Fatal(err)
	}
	liveIDs(t, s, "p1", "box", ids, []string{"a", "c"})

	// Expiry set behind the service's back is honoured too.
	if _, err := pool.Exec(ctx, `UPDATE cards SET expires_at = $1 WHERE tenant_id = 'p1' AND card_id = 'c'`, clk.Now()); err != nil {
		t.Fatal(err)
	}
	liveIDs(t, s, "p1", "box", ids, []string{"a"})

	// An expiry moved by SQL into the future is the one that counts.
	if _, err := pool.Exec(ctx, `UPDATE cards SET expires_at = $1 WHERE tenant_id = 'p1' AND card_id = 'a'`, clk.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	liveIDs(t, s, "p1", "box", ids, []string{"a"})
	clk.Add(2 * time.Minute)
	liveIDs(t, s, "p1", "box", ids, nil)
}

// A purged id can name a new card with other content; the cache must not
// serve the old one.
func TestCachedReadsAfterPurgeAndRewrite(t *testing.T) {
	ctx := context.Background()
	s, pool, clk := newPoolService(t)
	if _, err := s.AddCards(ctx, "p1", []cardbox.NewCard{note("a", "first")}); err != nil {
		t.Fatal(err)
	}
	if raw, err := s.GetCardJSONWithin(ctx, "p1", "a", unlimited); err != nil || !json.Valid(raw) {
		t.Fatalf("%s, %v", raw, err)
	}
	// Another process deletes and purges it, then writes it anew.
	if _, err := pool.Exec(ctx, `DELETE FROM cards WHERE tenant_id = 'p1' AND card_id = 'a'`); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	other := cardbox.New(pool, cardbox.Options{Now: clk.Now})
	if _, err := other.AddCards(ctx, "p1", []cardbox.NewCard{note("a", "second")}); err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetCardJSONWithin(ctx, "p1", "a", unlimited)
	var got struct {
		Content string `json:"content"`
	}
	if err != nil || json.Unmarshal(raw, &got) != nil || got.Content != "second" {
		t.Fatalf("card a = %s, %v", raw, err)
	}
}

func TestCachedReadsKeepProjectsApart(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newPoolService(t)
	for _, p := range []string{"p1", "p2"} {
		if _, err := s.AddCards(ctx, p, []cardbox.NewCard{note("a", "belongs to "+p)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // cold, then cached
		for _, p := range []string{"p1", "p2"} {
			raw, err := s.GetCardJSONWithin(ctx, p, "a", unlimited)
			var got struct {
				ProjectID string `json:"project_id"`
				Content   string `json:"content"`
			}
			if err != nil || json.Unmarshal(raw, &got) != nil || got.ProjectID != p || got.Content != "belongs to "+p {
				t.Fatalf("%s: card a = %s, %v", p, raw, err)
			}
		}
		if _, err := s.GetCardJSONWithin(ctx, "p3", "a", unlimited); !errors.Is(err, rules.ErrNotFound) {
			t.Fatalf("p3 reads p1's or p2's card: %v", err)
		}
	}
}

// The reads answer the cards as stored, rendered (Card.AppendJSON), read
// cold and from the cache alike.
func TestJSONReadsMatchCardsAsStored(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	ttl := note("ttl", "expires")
	ttl.TTLSeconds = 3600
	tool := cardbox.NewCard{
		CardID: "tool", Metadata: json.RawMessage(`{"type":"tool.result","step_id":"s\u00e9"}`),
		ToolCallID: "call-1", Content: json.RawMessage(`{"rows": [1, 2]}`),
	}
	added, err := s.AddCards(ctx, "p1", []cardbox.NewCard{note("a", "x\"y\n"), ttl, tool})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]cardbox.Card{}
	for _, c := range added {
		stored[c.CardID] = c
	}
	ids := []string{"tool", "nope", "a", "ttl", "a"}
	want := []string{"tool", "a", "ttl"}
	for range 2 { // cold, then cached
		rendered, err := s.GetCardsJSONWithin(ctx, "p1", ids, unlimited)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonIDs(t, rendered.Cards); !slices.Equal(got, want) || !slices.Equal(rendered.MissingIDs, []string{"nope"}) {
			t.Fatalf("read %v, missing %v; want %v, missing [nope]", got, rendered.MissingIDs, want)
		}
		for i, id := range want {
			c := stored[id]
			if want := c.AppendJSON(nil); string(rendered.Cards[i]) != string(want) {
				t.Errorf("card %s:\n got %s\nwant %s", id, rendered.Cards[i], want)
			}
		}
	}
}

// A read of cached cards asks Postgres only whether the project's cards
// changed: it completes while another transaction holds every lock on
// cards. Expiry is then told from the cached card, and a project deleted
// behind the service's back reads as having no cards.
func TestCachedReadsDoNotReadCards(t *testing.T) {
	ctx := context.Background()
	s, pool, clk := newPoolService(t)
	short := note("short", "expires")
	short.TTLSeconds = 60
	if _, err := s.AddCards(ctx, "p1", []cardbox.NewCard{note("a", "one"), short}); err != nil {
		t.Fatal(err)
	}
	ids := []string{"a", "short"}
	if _, err := s.SaveBox(ctx, "p1", "box", cardbox.BoxInput{CardIDs: ids}); err != nil {
		t.Fatal(err)
	}
	liveIDs(t, s, "p1", "box", ids, ids) // fills the cache

	lock, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback(context.Background()) })
	if _, err := lock.Exec(ctx, "LOCK TABLE cards IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	readCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := s.GetCardsJSONWithin(readCtx, "p1", ids, unlimited)
	if err != nil {
		t.Fatalf("cached read while cards is locked: %v", err)
	}
	if got := jsonIDs(t, res.Cards); !slices.Equal(got, ids) {
		t.Fatalf("cached read = %v, want %v", got, ids)
	}
	clk.Add(time.Minute) // short expires; a is still served from the cache
	if res, err = s.GetCardsJSONWithin(readCtx, "p1", []string{"a"}, unlimited); err != nil || len(res.Cards) != 1 {
		t.Fatalf("cached read after the clock moved = %v, %v", res, err)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	liveIDs(t, s, "p1", "box", ids, []string{"a"})

	if _, err := pool.Exec(ctx, `UPDATE tenants SET deleted_at = now() WHERE tenant_id = 'p1'`); err != nil {
		t.Fatal(err)
	}
	liveIDs(t, s, "p1", "box", ids, nil)
}
