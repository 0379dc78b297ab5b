package cardbox_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/assembly"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit"
)

// keptCards are the cards an assembly kept, in order, from its entries.
func keptCards(t *testing.T, s *cardbox.Service, a assembly.Assembled) []string {
	t.Helper()
	byEntry := map[string]string{}
	for _, e := range mustEntries(t, s, "p", "b").Entries {
		byEntry[e.EntryID] = e.CardID
	}
	var ids []string
	for _, id := range a.EntryIDs {
		ids = append(ids, byEntry[id])
	}
	return ids
}

// TestAssemblySeesEveryBoxEdit: an assembly right after an edit of the
// box (through the service or by SQL) sees the edit, although the
// assembly before it left the box's candidates in the prepared cache, and
// answers as a service with empty caches.
func TestAssemblySeesEveryBoxEdit(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Tx(t)
	clk := testkit.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	s := cardbox.New(db, cardbox.Options{Now: clk.Now})
	if _, err := s.AddCards(ctx, "p", []cardbox.NewCard{
		typed("a", "agent.thought", "first"), typed("b", "agent.thought", "second"),
		typed("c", "agent.thought", "third"), typed("sys", "sys.profile", "a system card"),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBox(ctx, "p", "b", cardbox.BoxInput{CardIDs: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	sql := func(stmt string) func(t *testing.T) {
		return func(t *testing.T) {
			t.Helper()
			if _, err := db.Exec(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
	}
	firstEntry := func(t *testing.T) string {
		t.Helper()
		return mustEntries(t, s, "p", "b").Entries[0].EntryID
	}
	for _, tt := range []struct {
		name   string
		change func(t *testing.T)
		kept   []string
	}{
		{"unchanged", func(*testing.T) {}, []string{"a", "b"}},
		{"appended", func(t *testing.T) {
			t.Helper()
			if _, err := s.AppendToBox(ctx, "p", "b", []string{"c"}); err != nil {
				t.Fatal(err)
			}
		}, []string{"a", "b", "c"}},
		{"saved", func(t *testing.T) {
			t.Helper()
			if _, err := s.SaveBox(ctx, "p", "b", cardbox.BoxInput{CardIDs: []string{"c", "a"}}); err != nil {
				t.Fatal(err)
			}
		}, []string{"c", "a"}},
		{"inserted", func(t *testing.T) {
			t.Helper()
			if _, err := s.InsertEntries(ctx, "p", "b", []string{"sys"}, layout.Place{}, false); err != nil {
				t.Fatal(err)
			}
		}, []string{"sys", "c", "a"}},
		{"moved", func(t *testing.T) {
			t.Helper()
			e := mustEntries(t, s, "p", "b").Entries[2] // a
			if _, err := s.ChangeEntry(ctx, "p", "b", e.EntryID, cardbox.EntryChange{Move: true, Place: layout.Place{Zone: "stable"}}); err != nil {
				t.Fatal(err)
			}
		}, []string{"sys", "a", "c"}},
		{"made a draft", func(t *testing.T) {
			t.Helper()
			if _, err := s.ChangeEntry(ctx, "p", "b", firstEntry(t), cardbox.EntryChange{Draft: new(true)}); err != nil {
				t.Fatal(err)
			}
		}, []string{"a", "c"}},
		{"removed", func(t *testing.T) {
			t.Helper()
			if err := s.RemoveEntry(ctx, "p", "b", mustEntries(t, s, "p", "b").Entries[1].EntryID); err != nil {
				t.Fatal(err)
			}
		}, []string{"c"}},
		{"rewritten by SQL", sql(`UPDATE boxes SET card_ids = ARRAY['b','b','c'], entry_ids = NULL, zones = NULL,
			positions = NULL, drafts = NULL WHERE tenant_id = 'p' AND box_id = 'b'`), []string{"b", "b", "c"}},
		{"purged and made again by SQL", sql(`DELETE FROM boxes WHERE tenant_id = 'p' AND box_id = 'b';
			INSERT INTO boxes (tenant_id, box_id, card_ids) VALUES ('p', 'b', ARRAY['a'])`), []string{"a"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := assembly.Request{Budget: 1000, Tokenizer: "cl100k_base", Format: assembly.FormatMessages}
			for range 2 { // the first fills the caches, the second is served from them
				if _, err := s.Assemble(ctx, "p", "b", req); err != nil {
					t.Fatal(err)
				}
			}
			tt.change(t)
			got, err := s.Assemble(ctx, "p", "b", req)
			if err != nil {
				t.Fatal(err)
			}
			if ids := keptCards(t, s, got); !slices.Equal(ids, tt.kept) {
				t.Fatalf("kept %v, want %v", ids, tt.kept)
			}
			fresh, err := cardbox.New(db, cardbox.Options{Now: clk.Now, CardCacheBytes: -1}).Assemble(ctx, "p", "b", req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, fresh) {
				t.Fatalf("from the caches\n%+v\nwith empty caches\n%+v", got, fresh)
			}
		})
	}
	t.Run("deleted", func(t *testing.T) {
		if err := s.DeleteBox(ctx, "p", "b"); err != nil {
			t.Fatal(err)
		}
		_, err := s.Assemble(ctx, "p", "b", assembly.Request{Budget: 1000, Tokenizer: "cl100k_base"})
		if !errors.Is(err, rules.ErrNotFound) {
			t.Fatalf("assembled a deleted box: %v", err)
		}
	})
}

// TestAssemblySeesACardWrittenAfterItWasMissing: a box naming a card
// that does not exist yet assembles without it, and with it once it is
// written (writing a card moves no counter, so the prepared cache must
// not have kept the first answer's candidates).
func TestAssemblySeesACardWrittenAfterItWasMissing(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Tx(t)
	s := cardbox.New(db, cardbox.Options{})
	if _, err := s.AddCards(ctx, "p", []cardbox.NewCard{typed("a", "agent.thought", "first")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBox(ctx, "p", "b", cardbox.BoxInput{CardIDs: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	// The service refuses to name a card that does not exist; SQL does not.
	if _, err := db.Exec(ctx, `UPDATE boxes SET card_ids = ARRAY['a', 'later'] WHERE tenant_id = 'p' AND box_id = 'b'`); err != nil {
		t.Fatal(err)
	}
	req := assembly.Request{Budget: 1000, Tokenizer: "cl100k_base"}
	for range 2 {
		a, err := s.Assemble(ctx, "p", "b", req)
		if err != nil {
			t.Fatal(err)
		}
		if r := reasons(a); r["later"] != assembly.LeftOutMissing {
			t.Fatalf("left out %v", r)
		}
	}
	if _, err := s.AddCards(ctx, "p", []cardbox.NewCard{typed("later", "agent.thought", "second")}); err != nil {
		t.Fatal(err)
	}
	a, err := s.Assemble(ctx, "p", "b", req)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.EntryIDs) != 2 || len(a.LeftOut) != 0 {
		t.Fatalf("kept %v, left out %+v", a.EntryIDs, a.LeftOut)
	}
}

// TestAssemblyAfterAConcurrentEdit: while other goroutines assemble a
// box all the time (filling and replacing its prepared candidates), every
// assembly made after an append returned holds the appended card.
func TestAssemblyAfterAConcurrentEdit(t *testing.T) {
	ctx := context.Background()
	s := cardbox.New(pgtest.NewPool(t), cardbox.Options{})
	const appends = 20
	var cards []cardbox.NewCard
	for i := range appends + 1 {
		cards = append(cards, typed(fmt.Sprint("c", i), "agent.thought", fmt.Sprint("card ", i)))
	}
	if _, err := s.AddCards(ctx, "p", cards); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBox(ctx, "p", "b", cardbox.BoxInput{CardIDs: []string{"c0"}}); err != nil {
		t.Fatal(err)
	}
	req := assembly.Request{Budget: 1 << 20, Tokenizer: "cl100k_base", Format: assembly.FormatMessages}
	done := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := s.Assemble(ctx, "p", "b", req); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := 1; i <= appends; i++ {
		if _, err := s.AppendToBox(ctx, "p", "b", []string{fmt.Sprint("c", i)}); err != nil {
			t.Error(err)
			break
		}
		a, err := s.Assemble(ctx, "p", "b", req)
		if err != nil {
			t.Error(err)
			break
		}
		if len(a.EntryIDs) != i+1 {
			t.Errorf("after append %d: %d entries kept, want %d", i, len(a.EntryIDs), i+1)
			break
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
