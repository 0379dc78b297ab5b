package cardbox

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// A project deleted in Postgres and forgotten: its cached cards are gone,
// it reads as a project that never existed, it takes no write (here or in
// a service that never knew it), and other projects are untouched.
func TestForgetProject(t *testing.T) {
	ctx := context.Background()
	tx := pgtest.Tx(t)
	s := New(tx, Options{})
	card := NewCard{CardID: "c", Content: json.RawMessage(`"hi"`), Metadata: json.RawMessage(`{"type":"agent.thought"}`)}
	for _, p := range []string{"acme", "bravo"} {
		if _, err := s.AddCards(ctx, p, []NewCard{card}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SaveBox(ctx, p, "b", BoxInput{CardIDs: []string{"c"}}); err != nil {
			t.Fatal(err)
		}
		if res, err := s.GetCardsJSONWithin(ctx, p, []string{"c"}, unlimited); err != nil || len(res.Cards) != 1 {
			t.Fatalf("%s: %+v, %v", p, res, err)
		}
	}
	pgtest.MarkTenantDeleted(t, tx, "acme")
	pgtest.PurgeDeletedTenant(t, tx, "acme")
	s.ForgetProject("acme")

	if n := s.cache.DropProject("acme"); n != 0 {
		t.Errorf("%d cards of acme still cached", n)
	}
	if res, err := s.GetCardsJSONWithin(ctx, "acme", []string{"c"}, unlimited); err != nil || len(res.Cards) != 0 || len(res.MissingIDs) != 1 {
		t.Errorf("acme's card: %+v, %v", res, err)
	}
	if _, err := s.LoadBox(ctx, "acme", "b"); !errors.Is(err, rules.ErrNotFound) {
		t.Errorf("acme's box: %v", err)
	}
	for _, svc := range []*Service{s, New(tx, Options{})} {
		writes := map[string]error{
			"cards":      second(svc.AddCards(ctx, "acme", []NewCard{card})),
			"create box": second(svc.CreateBox(ctx, "acme", BoxInput{})),
			"save box":   second(svc.SaveBox(ctx, "acme", "b", BoxInput{})),
		}
		for name, err := range writes {
			if !errors.Is(err, rules.ErrConflict) {
				t.Errorf("%s of the deleted project: %v, want a conflict", name, err)
			}
		}
	}
	if res, err := s.GetCardsJSONWithin(ctx, "bravo", []string{"c"}, unlimited); err != nil || len(res.Cards) != 1 {
		t.Errorf("bravo's card: %+v, %v", res, err)
	}
	if b, err := s.LoadBox(ctx, "bravo", "b"); err != nil || len(b.CardIDs) != 1 {
		t.Errorf("bravo's box: %+v, %v", b, err)
	}
}

func second[T any](_ T, err error) error { return err }
