package cardbox_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/assembly"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit"
)

// conversation writes a small conversation with a tool call into box b.
func conversation(t *testing.T, s *cardbox.Service) {
	t.Helper()
	ctx := context.Background()
	call := typed("call", "tool.call", "")
	call.Content = nil
	call.ToolCalls = json.RawMessage(`[{"id":"c1","type":"function","function":{"name":"search","arguments":"{\"q\":\"weather\"}"}}]`)
	result := typed("result", "tool.result", "sunny, 21 degrees")
	result.ToolCallID = "c1"
	expiring := typed("old", "agent.thought", "a thought that expires soon")
	expiring.TTLSeconds = 60
	if _, err := s.AddCards(ctx, "p", []cardbox.NewCard{
		typed("sys", "sys.profile", "You are a weather assistant. Answer in one sentence."),
		typed("ask", "task.instruction", "What is the weather in Paris today?"),
		expiring,
		typed("think", "agent.thought", "I should look the weather up before answering the question."),
		call, result,
		typed("gone", "agent.thought", "deleted later"),
		typed("answer", "task.deliverable", "It is sunny and 21 degrees in Paris."),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBox(ctx, "p", "b", cardbox.BoxInput{CardIDs: []string{"sys", "ask", "old", "think", "call", "result", "gone", "answer"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCard(ctx, "p", "gone"); err != nil {
		t.Fatal(err)
	}
}

func reasons(a assembly.Assembled) map[string]string {
	m := map[string]string{}
	for _, l := range a.LeftOut {
		m[l.CardID] = l.Reason
	}
	return m
}

func TestAssembleUnderBudgets(t *testing.T) {
	ctx := context.Background()
	s, clk := newService(t)
	conversation(t, s)
	clk.Add(2 * time.Minute) // "old" expires
	full, err := s.Assemble(ctx, "p", "b", assembly.Request{Budget: 1000, Tokenizer: "cl100k_base"})
	if err != nil {
		t.Fatal(err)
	}
	if r := reasons(full); r["gone"] != assembly.LeftOutDeleted || r["old"] != assembly.LeftOutExpired || len(r) != 2 {
		t.Fatalf("left out %v", r)
	}
	perm := full.Zones[layout.ZonePermanent].Tokens
	for _, tt := range []struct {
		name   string
		budget int
		kept   []string
	}{
		{"all", full.Tokens, []string{"sys", "ask", "think", "call", "result", "answer"}},
		{"without the oldest working card", full.Tokens - 1, []string{"sys", "ask", "call", "result", "answer"}},
		{"the tool call and its result go together", full.Tokens - 13, []string{"sys", "ask", "answer"}},
		{"the permanent zone alone", perm, []string{"sys", "ask"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := assembly.Request{Budget: tt.budget, Tokenizer: "cl100k_base", Format: assembly.FormatMessages}
			a, err := s.Assemble(ctx, "p", "b", req)
			if err != nil {
				t.Fatal(err)
			}
			var msgs []map[string]any
			if err := json.Unmarshal(a.Window, &msgs); err != nil {
				t.Fatal(err)
			}
			if len(msgs) != len(tt.kept) || a.Tokens > tt.budget {
				t.Fatalf("kept %v (%d tokens of %d), want cards %v", a.EntryIDs, a.Tokens, tt.budget, tt.kept)
			}
			again, err := s.Assemble(ctx, "p", "b", req)
			if err != nil || !bytes.Equal(again.Window, a.Window) || again.Hash != a.Hash {
				t.Fatalf("a second assembly differs: %s vs %s", again.Window, a.Window)
			}
		})
	}
	_, err = s.Assemble(ctx, "p", "b", assembly.Request{Budget: perm - 1, Tokenizer: "o200k_base"})
	var be *assembly.BudgetError
	if !errors.As(err, &be) || be.Permanent-be.Budget < 1 {
		t.Fatalf("budget below the permanent zone: %v", err)
	}
}

func TestAssembleMessagesShape(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	conversation(t, s)
	a, err := s.Assemble(ctx, "p", "b", assembly.Request{Budget: 1000, Tokenizer: "o200k_base", Format: "messages"})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []struct {
		Role       string          `json:"role"`
		Content    *string         `json:"content"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	}
	if err := json.Unmarshal(a.Window, &msgs); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if want := []string{"system", "user", "assistant", "assistant", "assistant", "tool", "assistant"}; !slices.Equal(roles, want) {
		t.Fatalf("roles %v, want %v", roles, want)
	}
	if msgs[4].Content != nil || len(msgs[4].ToolCalls) == 0 || msgs[5].ToolCallID != "c1" {
		t.Fatalf("tool call messages: %s", a.Window)
	}
}

func TestAssembleBadInput(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	conversation(t, s)
	for _, tt := range []struct {
		req   assembly.Request
		field string
	}{
		{assembly.Request{Budget: 0, Tokenizer: "cl100k_base"}, "budget"},
		{assembly.Request{Budget: -5, Tokenizer: "cl100k_base"}, "budget"},
		{assembly.Request{Budget: 10, Tokenizer: "gpt2"}, "tokenizer"},
		{assembly.Request{Budget: 10, Tokenizer: "cl100k_base", Format: "xml"}, "format"},
	} {
		_, err := s.Assemble(ctx, "p", "b", tt.req)
		var ve *rules.ValidationError
		if !errors.As(err, &ve) || ve.Field != tt.field {
			t.Errorf("%+v: %v, want an error of %s", tt.req, err, tt.field)
		}
	}
	if _, err := s.Assemble(ctx, "other", "b", assembly.Request{Budget: 10, Tokenizer: "cl100k_base"}); !errors.Is(err, rules.ErrNotFound) {
		t.Errorf("another project's box: %v", err)
	}
}

func TestCardsWithContentHash(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	a, b := typed("a", "myapp.note", ""), typed("b", "myapp.note", "")
	a.Content, b.Content = json.RawMessage(`{"x": 1, "y": [true, "z"]}`), json.RawMessage(`{"y":[true,"z"],"x":1}`)
	a.Metadata = json.RawMessage(`{"type":"myapp.note","role":"user"}`)
	b.Metadata = a.Metadata
	if _, err := s.AddCards(ctx, "p", []cardbox.NewCard{a, b, typed("c", "agent.thought", "other")}); err != nil {
		t.Fatal(err)
	}
	h, _ := rules.ContentHash(a.Content)
	got, err := s.CardsWithContentHash(ctx, "p", hex.EncodeToString(h))
	if err != nil || len(got) != 2 {
		t.Fatalf("same content: %d cards, %v", len(got), err)
	}
	if other, err := s.CardsWithContentHash(ctx, "q", hex.EncodeToString(h)); err != nil || len(other) != 0 {
		t.Fatalf("another project: %d cards, %v", len(other), err)
	}
	if _, err := s.CardsWithContentHash(ctx, "p", "zz"); !errors.Is(err, rules.ErrInvalid) {
		t.Fatalf("bad hash: %v", err)
	}
}

// TestAssembleCachedFactsFollowChanges assembles a box, changes its
// cards, and checks that an assembly served from the facts and card
// caches answers as one by a service with empty caches.
func TestAssembleCachedFactsFollowChanges(t *testing.T) {
	ctx := context.Background()
	db := pgtest.Tx(t)
	clk := testkit.NewClock(testStart)
	s := cardbox.New(db, cardbox.Options{Now: clk.Now})
	conversation(t, s)
	for _, tt := range []struct {
		name   string
		change func(t *testing.T)
		want   map[string]string // left out, by card id
	}{
		{"unchanged", func(*testing.T) {}, map[string]string{"gone": assembly.LeftOutDeleted}},
		{"deleted through the service", func(t *testing.T) {
			t.Helper()
			if err := s.DeleteCard(ctx, "p", "think"); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"gone": assembly.LeftOutDeleted, "think": assembly.LeftOutDeleted}},
		{"expired", func(*testing.T) { clk.Add(2 * time.Minute) },
			map[string]string{"gone": assembly.LeftOutDeleted, "think": assembly.LeftOutDeleted, "old": assembly.LeftOutExpired}},
		{"deleted by SQL", func(t *testing.T) {
			t.Helper()
			if _, err := db.Exec(ctx, `UPDATE cards SET deleted_at = now() WHERE tenant_id = 'p' AND card_id = 'answer'`); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"gone": assembly.LeftOutDeleted, "think": assembly.LeftOutDeleted, "old": assembly.LeftOutExpired, "answer": assembly.LeftOutDeleted}},
		{"purged and written again as a system card", func(t *testing.T) {
			t.Helper()
			if _, err := db.Exec(ctx, `DELETE FROM cards WHERE tenant_id = 'p' AND card_id = 'answer'`); err != nil {
				t.Fatal(err)
			}
			clk.Add(time.Second) // a new version
			if _, err := s.AddCards(ctx, "p", []cardbox.NewCard{typed("answer", "sys.profile", "written again")}); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"gone": assembly.LeftOutDeleted, "think": assembly.LeftOutDeleted, "old": assembly.LeftOutExpired}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, format := range []string{assembly.FormatCards, assembly.FormatMessages} {
				req := assembly.Request{Budget: 1000, Tokenizer: "o200k_base", Format: format}
				if _, err := s.Assemble(ctx, "p", "b", req); err != nil { // fills the caches
					t.Fatal(err)
				}
			}
			tt.change(t)
			for _, format := range []string{assembly.FormatCards, assembly.FormatMessages} {
				req := assembly.Request{Budget: 1000, Tokenizer: "o200k_base", Format: format}
				cached, err := s.Assemble(ctx, "p", "b", req)
				if err != nil {
					t.Fatal(err)
				}
				fresh, err := cardbox.New(db, cardbox.Options{Now: clk.Now}).Assemble(ctx, "p", "b", req)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(cached, fresh) {
					t.Fatalf("%s: from the caches\n%+v\nwith empty caches\n%+v", format, cached, fresh)
				}
				if got := reasons(cached); !maps.Equal(got, tt.want) {
					t.Fatalf("%s: left out %v, want %v", format, got, tt.want)
				}
			}
		})
	}
}

// TestAssemblyFromTheCachesIsTheSameBytes: an assembly served from the
// caches (facts, card JSON, rendered chat messages) is byte for byte the
// one a service without caches renders from Postgres, in both formats,
// under every budget, with tool calls, drafts, deleted and expired cards.
func TestAssemblyFromTheCachesIsTheSameBytes(t *testing.T) {
	tx := pgtest.Tx(t)
	now := time.Now()
	clock := func() time.Time { return now }
	cached := cardbox.New(tx, cardbox.Options{Now: clock})
	uncached := cardbox.New(tx, cardbox.Options{Now: clock, CardCacheBytes: -1})
	conversation(t, cached)
	ctx := context.Background()
	if _, err := cached.InsertEntries(ctx, "p", "b", []string{"think"}, layout.Place{Zone: "stable"}, true); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute) // "old" expires
	for _, format := range []string{assembly.FormatCards, assembly.FormatMessages} {
		for _, budget := range []int{60, 100, 1 << 20} {
			req := assembly.Request{Budget: budget, Tokenizer: "o200k_base", Format: format}
			want, err := uncached.Assemble(ctx, "p", "b", req)
			if err != nil {
				t.Fatal(err)
			}
			for pass := range 3 { // the first fills the caches
				got, err := cached.Assemble(ctx, "p", "b", req)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s, budget %d, pass %d:\n got %+v\nwant %+v", format, budget, pass, got, want)
				}
			}
		}
	}
}
