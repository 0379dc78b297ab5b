package cardbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/sweep"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit"
)

// counted is what Postgres counts for a project's cards and boxes
// (tenant_usage and the log the triggers write), and recounted what its
// rows hold now.
func counted(t *testing.T, tx pgx.Tx, project string) (counted, recounted int64) {
	t.Helper()
	err := tx.QueryRow(context.Background(), `
		SELECT coalesce((SELECT cardbox_bytes FROM tenant_usage WHERE tenant_id = $1), 0)
		       + coalesce((SELECT sum(bytes) FROM cardbox_usage_log WHERE tenant_id = $1), 0),
		       coalesce((SELECT sum(card_bytes(card_id, content, tool_calls, tool_call_id, metadata)) FROM cards WHERE tenant_id = $1), 0)
		       + coalesce((SELECT sum(box_bytes(box_id, card_ids, parent_ids, metadata)) FROM boxes WHERE tenant_id = $1), 0)`,
		project).Scan(&counted, &recounted)
	if err != nil {
		t.Fatal(err)
	}
	return counted, recounted
}

// Every write of cards and boxes, and the sweeper's purge and compaction
// of the log, keeps a project's counted bytes equal to what its rows
// hold; soft deletes keep the bytes until the purge; another project's
// count never moves.
func TestCardBoxBytesAreCounted(t *testing.T) {
	ctx := context.Background()
	tx := pgtest.Tx(t)
	clk := testkit.NewClock(testStart)
	s := cardbox.New(tx, cardbox.Options{Now: clk.Now})
	if _, err := s.AddCards(ctx, "other", []cardbox.NewCard{note("o", "other project's")}); err != nil {
		t.Fatal(err)
	}
	other, _ := counted(t, tx, "other")
	tool := cardbox.NewCard{CardID: "t", Metadata: json.RawMessage(`{"type":"tool.result"}`), ToolCallID: "call-1",
		Content: json.RawMessage(`{"ok": true, "rows": [1, 2, 3]}`)}
	for _, step := range []struct {
		name string
		do   func() error
		grow bool // the count grows (else it may shrink or stay)
	}{
		{"add cards", func() error {
			_, err := s.AddCards(ctx, "p1", []cardbox.NewCard{note("a", "hello"), note("b", "world"), tool})
			return err
		}, true},
		{"replay a card", func() error { _, err := s.AddCards(ctx, "p1", []cardbox.NewCard{note("a", "hello")}); return err }, false},
		{"create a box", func() error {
			_, err := s.CreateBox(ctx, "p1", cardbox.BoxInput{CardIDs: []string{"a"}, Metadata: json.RawMessage(`{"k": "v"}`)})
			return err
		}, true},
		{"save a box", func() error {
			_, err := s.SaveBox(ctx, "p1", "box", cardbox.BoxInput{CardIDs: []string{"a", "b"}})
			return err
		}, true},
		{"replace it", func() error {
			_, err := s.SaveBox(ctx, "p1", "box", cardbox.BoxInput{CardIDs: []string{"b"}, ParentIDs: []string{"older"}})
			return err
		}, false},
		{"append to it", func() error { _, err := s.AppendToBox(ctx, "p1", "box", []string{"a", "t"}); return err }, true},
		{"delete a card", func() error { return s.DeleteCard(ctx, "p1", "b") }, false},
		{"delete the box", func() error { return s.DeleteBox(ctx, "p1", "box") }, false},
		{"purge them", func() error {
			clk.Add(2 * time.Hour)
			_, err := s.NewSweeper(sweep.Config{DeletedRetention: time.Hour}).Sweep(ctx)
			return err
		}, false},
	} {
		before, _ := counted(t, tx, "p1")
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got, want := counted(t, tx, "p1")
		if got != want || (step.grow && got <= before) {
			t.Errorf("%s: counted %d bytes (before %d), the rows hold %d", step.name, got, before, want)
		}
		if n, _ := counted(t, tx, "other"); n != other {
			t.Errorf("%s: the other project's count moved from %d to %d", step.name, other, n)
		}
	}
	var logged int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM cardbox_usage_log`).Scan(&logged); err != nil || logged != 0 {
		t.Errorf("after a sweep the log holds %d rows (%v), want none", logged, err)
	}
}

var errFull = errors.New("over quota")

// Options.Admit is asked before every card and box write with about what
// it adds; a refusal is returned as it is and nothing is written.
func TestAdmitRefusesCardAndBoxWrites(t *testing.T) {
	ctx := context.Background()
	tx := pgtest.Tx(t)
	var asked []int64
	refuse := false
	s := cardbox.New(tx, cardbox.Options{Admit: func(_ context.Context, project string, adding int64) error {
		if project != "p1" {
			t.Errorf("admit asked for project %q", project)
		}
		asked = append(asked, adding)
		if refuse {
			return errFull
		}
		return nil
	}})
	if _, err := s.AddCards(ctx, "p1", []cardbox.NewCard{note("a", "hello")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBox(ctx, "p1", "box", cardbox.BoxInput{CardIDs: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	refuse = true
	before, _ := counted(t, tx, "p1")
	for name, write := range map[string]func() error{
		"add cards":  func() error { _, err := s.AddCards(ctx, "p1", []cardbox.NewCard{note("c", "new")}); return err },
		"create box": func() error { _, err := s.CreateBox(ctx, "p1", cardbox.BoxInput{CardIDs: []string{"a"}}); return err },
		"save box":   func() error { _, err := s.SaveBox(ctx, "p1", "box2", cardbox.BoxInput{}); return err },
		"append":     func() error { _, err := s.AppendToBox(ctx, "p1", "box", []string{"a"}); return err },
	} {
		asked = nil
		if err := write(); !errors.Is(err, errFull) {
			t.Errorf("%s: %v, want the refusal", name, err)
		}
		if len(asked) != 1 || asked[0] <= 0 {
			t.Errorf("%s: admit asked %v, want once with the bytes it adds", name, asked)
		}
		if after, _ := counted(t, tx, "p1"); after != before {
			t.Errorf("%s: refused, but the project's bytes went from %d to %d", name, before, after)
		}
	}
	if box, err := s.LoadBox(ctx, "p1", "box"); err != nil || len(box.CardIDs) != 1 {
		t.Errorf("the refused append changed the box: %+v, %v", box, err)
	}
}
