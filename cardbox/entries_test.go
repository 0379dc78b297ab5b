package cardbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

func typed(id, typ, text string) cardbox.NewCard {
	content, _ := json.Marshal(text)
	return cardbox.NewCard{CardID: id, Content: content, Metadata: json.RawMessage(`{"type":"` + typ + `"}`)}
}

func entryCards(entries []layout.Entry) []string {
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.CardID)
	}
	return ids
}

func mustEntries(t *testing.T, s *cardbox.Service, project, box string) cardbox.BoxEntries {
	t.Helper()
	b, err := s.Entries(context.Background(), project, box)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A plain box shows default zones without changing; its first edit keeps
// those entries, and the box's card_ids follow zone, then position order.
func TestEntriesInsertMoveRemove(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	if _, err := s.AddCards(ctx, "p", []cardbox.NewCard{
		typed("sys", "sys.profile", "you are terse"), typed("t1", "agent.thought", "one"),
		typed("t2", "agent.thought", "two"), typed("ask", "task.instruction", "summarize"),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBox(ctx, "p", "b", cardbox.BoxInput{CardIDs: []string{"t1", "sys", "t2", "ask"}}); err != nil {
		t.Fatal(err)
	}
	plain := mustEntries(t, s, "p", "b")
	if plain.Structured || !slices.Equal(entryCards(plain.Entries), []string{"sys", "ask", "t1", "t2"}) {
		t.Fatalf("plain box entries = %+v", plain)
	}
	if box, _ := s.LoadBox(ctx, "p", "b"); !slices.Equal(box.CardIDs, []string{"t1", "sys", "t2", "ask"}) {
		t.Fatalf("a read changed the plain box: %v", box.CardIDs)
	}
	t1 := plain.Entries[2].EntryID
	added, err := s.InsertEntries(ctx, "p", "b", []string{"t2", "t1"}, layout.Place{After: t1}, false)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := s.LoadBox(ctx, "p", "b")
	if want := []string{"sys", "ask", "t1", "t2", "t1", "t2"}; !slices.Equal(box.CardIDs, want) {
		t.Fatalf("after insert: card_ids %v, want %v", box.CardIDs, want)
	}
	stable := "stable"
	if _, err := s.ChangeEntry(ctx, "p", "b", added[1].EntryID, cardbox.EntryChange{Move: true, Place: layout.Place{Zone: stable}}); err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := s.ChangeEntry(ctx, "p", "b", added[0].EntryID, cardbox.EntryChange{Draft: &yes}); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveEntry(ctx, "p", "b", t1); err != nil {
		t.Fatal(err)
	}
	got := mustEntries(t, s, "p", "b")
	if want := []string{"sys", "ask", "t1", "t2", "t2"}; !slices.Equal(entryCards(got.Entries), want) {
		t.Fatalf("entries %+v, want cards %v", got.Entries, want)
	}
	if got.Entries[2].Zone != layout.ZoneStable || !got.Entries[3].Draft {
		t.Fatalf("entries %+v", got.Entries)
	}
	// Appends go to the end of each card's default zone.
	if _, err := s.AppendToBox(ctx, "p", "b", []string{"ask", "t1"}); err != nil {
		t.Fatal(err)
	}
	box, _ = s.LoadBox(ctx, "p", "b")
	if want := []string{"sys", "ask", "ask", "t1", "t2", "t2", "t1"}; !slices.Equal(box.CardIDs, want) {
		t.Fatalf("after append: %v, want %v", box.CardIDs, want)
	}
	// Pages name places: an insert elsewhere does not shift them.
	page, err := s.BoxCardsJSONWithin(ctx, "p", "b", 2, "", unlimited)
	if err != nil || page.NextCursor == "" {
		t.Fatalf("page: %+v, %v", page, err)
	}
	if _, err := s.InsertEntries(ctx, "p", "b", []string{"t1"}, layout.Place{Index: new(int)}, false); err != nil {
		t.Fatal(err)
	}
	// The page before the cursor ends where it did (at the draft t2), and
	// the new entry, at the front of the working zone, comes just before.
	next, err := s.BoxCardsJSONWithin(ctx, "p", "b", 2, page.NextCursor, unlimited)
	if err != nil || !slices.Equal(jsonIDs(t, next.Cards), []string{"t1", "t2"}) {
		t.Fatalf("next page: %+v, %v", next, err)
	}
}

func TestEntriesBadInput(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	if _, err := s.AddCards(ctx, "p", []cardbox.NewCard{typed("a", "agent.thought", "a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBox(ctx, "p", "b", cardbox.BoxInput{CardIDs: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	far := 5
	for _, tt := range []struct {
		name  string
		place layout.Place
		field string
	}{
		{"unknown zone", layout.Place{Zone: "attic"}, "zone"},
		{"index outside the zone", layout.Place{Index: &far}, "index"},
		{"unknown anchor", layout.Place{After: "e99"}, "after"},
		{"two anchors", layout.Place{After: "e1", Before: "e1"}, "after"},
	} {
		_, err := s.InsertEntries(ctx, "p", "b", []string{"a"}, tt.place, false)
		var ve *rules.ValidationError
		if !errors.As(err, &ve) || ve.Field != tt.field {
			t.Errorf("%s: err = %v, want a validation error of %s", tt.name, err, tt.field)
		}
	}
	if _, err := s.InsertEntries(ctx, "other", "b", []string{"a"}, layout.Place{}, false); !errors.Is(err, rules.ErrNotFound) && !errors.Is(err, rules.ErrUnknownCard) {
		t.Errorf("another project's box: %v", err)
	}
}

// Racing writers moving and inserting into one box all land: no edit is
// lost, and the box stays in order.
func TestEntriesConcurrentEdits(t *testing.T) {
	ctx := context.Background()
	s := cardbox.New(pgtest.NewPool(t), cardbox.Options{})
	var cards []cardbox.NewCard
	for i := range 8 {
		cards = append(cards, typed(fmt.Sprint("c", i), "agent.thought", fmt.Sprint("card ", i)))
	}
	if _, err := s.AddCards(ctx, "p", cards); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBox(ctx, "p", "b", cardbox.BoxInput{CardIDs: []string{"c0", "c1"}}); err != nil {
		t.Fatal(err)
	}
	first := mustEntries(t, s, "p", "b").Entries[0].EntryID
	const writers, edits = 6, 10
	errs := make(chan error, writers*edits*2)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range edits {
				added, err := s.InsertEntries(ctx, "p", "b", []string{fmt.Sprint("c", w)}, layout.Place{After: first}, false)
				if err != nil {
					errs <- err
					continue
				}
				// Move it to the front of the zone, or to the stable zone.
				place := layout.Place{Index: new(int)}
				if i%2 == 1 {
					place = layout.Place{Zone: "stable"}
				}
				if _, err := s.ChangeEntry(ctx, "p", "b", added[0].EntryID, cardbox.EntryChange{Move: true, Place: place}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := mustEntries(t, s, "p", "b").Entries
	if len(got) != 2+writers*edits {
		t.Fatalf("%d entries, want %d", len(got), 2+writers*edits)
	}
	ids := map[string]bool{}
	for i, e := range got {
		ids[e.EntryID] = true
		if i > 0 && (got[i-1].Zone > e.Zone || (got[i-1].Zone == e.Zone && got[i-1].Position >= e.Position)) {
			t.Fatalf("entries out of order at %d: %+v then %+v", i, got[i-1], e)
		}
	}
	if len(ids) != len(got) {
		t.Fatal("an entry id was given twice")
	}
	stable := 0
	for _, e := range got {
		if e.Zone == layout.ZoneStable {
			stable++
		}
	}
	if stable != writers*edits/2 {
		t.Fatalf("%d stable entries, want %d", stable, writers*edits/2)
	}
}

// Many inserts at one spot keep working (the position keys grow, never
// run out).
func TestEntriesManyInsertsAtOneSpot(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	if _, err := s.AddCards(ctx, "p", []cardbox.NewCard{typed("a", "agent.thought", "a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBox(ctx, "p", "b", cardbox.BoxInput{CardIDs: []string{"a", "a"}}); err != nil {
		t.Fatal(err)
	}
	first := mustEntries(t, s, "p", "b").Entries[0].EntryID
	const n = 300
	for i := range n {
		if _, err := s.InsertEntries(ctx, "p", "b", []string{"a"}, layout.Place{After: first}, false); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	got := mustEntries(t, s, "p", "b").Entries
	if len(got) != n+2 || got[0].EntryID != first || got[n+1].EntryID != "e2" {
		t.Fatalf("%d entries; first %+v last %+v", len(got), got[0], got[len(got)-1])
	}
	// Newest inserts come first after the anchor.
	if got[1].EntryID != fmt.Sprint("e", n+2) {
		t.Fatalf("entry after the anchor = %s", got[1].EntryID)
	}
}

func TestSnapshotsRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	if _, err := s.AddCards(ctx, "p", []cardbox.NewCard{
		typed("sys", "sys.profile", "be brief"), typed("a", "agent.thought", "a"), typed("b", "agent.thought", "b"),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBox(ctx, "p", "box", cardbox.BoxInput{CardIDs: []string{"sys", "a"}}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.TakeSnapshot(ctx, "p", "box", json.RawMessage(`{"label":"before"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendToBox(ctx, "p", "box", []string{"b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ChangeEntry(ctx, "p", "box", "e2", cardbox.EntryChange{Move: true, Place: layout.Place{Zone: "stable"}}); err != nil {
		t.Fatal(err)
	}
	d, err := s.DiffSnapshots(ctx, "p", "box", snap.SnapshotID, "")
	if err != nil || len(d.Added) != 1 || d.Added[0].CardID != "b" || len(d.Changed) != 1 || len(d.Removed) != 0 {
		t.Fatalf("diff = %+v, %v", d, err)
	}
	restored, err := s.RestoreSnapshot(ctx, "p", "box", "", snap.SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	read, err := s.GetSnapshot(ctx, "p", "box", snap.SnapshotID)
	if err != nil || !slices.Equal(restored.Entries, read.Entries) || !slices.Equal(read.Entries, snap.Entries) {
		t.Fatalf("restored %+v, snapshot %+v (%v)", restored.Entries, read.Entries, err)
	}
	list, err := s.Snapshots(ctx, "p", "box")
	if err != nil || len(list) != 1 || list[0].Length != 2 || !bytes.Contains(list[0].Metadata, []byte("before")) {
		t.Fatalf("list = %+v, %v", list, err)
	}
	// A template: the snapshot applied to a new box, which names its
	// source as parent.
	tmpl, err := s.RestoreSnapshot(ctx, "p", "new", "box", snap.SnapshotID)
	if err != nil || !slices.Equal(tmpl.Entries, snap.Entries) {
		t.Fatalf("template = %+v, %v", tmpl, err)
	}
	if nb, err := s.LoadBox(ctx, "p", "new"); err != nil || !slices.Equal(nb.ParentIDs, []string{"box"}) {
		t.Fatalf("new box = %+v, %v", nb, err)
	}
	// Derive keeps permanent and stable entries, working ones as chosen.
	if _, err := s.AppendToBox(ctx, "p", "box", []string{"b"}); err != nil {
		t.Fatal(err)
	}
	for _, keep := range []bool{false, true} {
		got, err := s.DeriveFromBox(ctx, "p", fmt.Sprint("child-", keep), "box", keep)
		want := []string{"sys"}
		if keep {
			want = []string{"sys", "a", "b"}
		}
		if err != nil || !slices.Equal(entryCards(got.Entries), want) {
			t.Fatalf("derive (keep working %v) = %+v, %v", keep, got, err)
		}
	}
}
