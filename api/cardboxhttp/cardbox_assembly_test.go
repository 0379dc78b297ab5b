package cardboxhttp_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/cardbox/rules"
)

// chat writes a short conversation into box "chat" of project p.
func chat(h *apitest.CardBox, p string) {
	h.T.Helper()
	h.AddCards(p,
		apitest.Card("sys", "sys.profile", "You are a concise travel assistant."),
		apitest.Card("ask", "task.instruction", "Plan a day in Lisbon."),
		apitest.Card("t1", "agent.thought", "Start with Belem in the morning, it is quieter then."),
		apitest.Card("t2", "agent.thought", "Lunch in Alfama, then the castle."),
		apitest.Card("t3", "task.deliverable", "Morning: Belem. Lunch: Alfama. Afternoon: Castelo."),
	)
	h.Do("PUT", "/projects/"+p+"/boxes/chat", map[string]any{"card_ids": []string{"sys", "ask", "t1", "t2", "t3"}}).Want(h.T, 200)
}

func TestAssembleRoute(t *testing.T) {
	h := apitest.NewCardBox(t)
	chat(h, "p")
	var full struct {
		Tokens  int
		Hash    string
		Zones   map[string]struct{ Tokens int }
		Cards   []json.RawMessage
		LeftOut []struct {
			CardID string `json:"card_id"`
			Reason string
		} `json:"left_out"`
	}
	first := h.Do("POST", "/projects/p/boxes/chat/assemble", map[string]any{"budget": 10000, "tokenizer": "cl100k_base"}).Want(t, 200)
	first.JSON(t, &full)
	if len(full.Cards) != 5 || !strings.HasPrefix(full.Hash, "blake3:") {
		t.Fatalf("full window: %s", first.Body)
	}
	again := h.Do("POST", "/projects/p/boxes/chat/assemble", map[string]any{"budget": 10000, "tokenizer": "cl100k_base"}).Want(t, 200)
	if !bytes.Equal(first.Body, again.Body) {
		t.Fatalf("two assemblies of one state differ:\n%s\n%s", first.Body, again.Body)
	}
	perm := full.Zones["permanent"].Tokens
	var tight struct {
		Messages []struct{ Role string }
		LeftOut  []struct {
			CardID string `json:"card_id"`
			Reason string
		} `json:"left_out"`
	}
	h.Do("POST", "/projects/p/boxes/chat/assemble", map[string]any{"budget": full.Tokens - 1, "tokenizer": "cl100k_base", "format": "messages"}).Want(t, 200).JSON(t, &tight)
	if len(tight.Messages) != 4 || tight.LeftOut[0].CardID != "t1" || tight.LeftOut[0].Reason != "budget" {
		t.Fatalf("tight window: %+v", tight)
	}
	short := h.Do("POST", "/projects/p/boxes/chat/assemble", map[string]any{"budget": perm - 2, "tokenizer": "o200k_base"}).Want(t, 422).APIError(t)
	if short.Details["short_by"] == nil || !strings.Contains(short.Message, "permanent zone") {
		t.Fatalf("budget below the permanent zone: %+v", short)
	}
	for _, tt := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"budget": 0, "tokenizer": "cl100k_base"}, "budget"},
		{map[string]any{"budget": -1, "tokenizer": "cl100k_base"}, "budget"},
		{map[string]any{"tokenizer": "cl100k_base"}, "budget"},
		{map[string]any{"budget": 10, "tokenizer": "p50k_base"}, "tokenizer"},
	} {
		e := h.Do("POST", "/projects/p/boxes/chat/assemble", tt.body).Want(t, 400).APIError(t)
		if e.Details["field"] != tt.field {
			t.Errorf("%v: %+v, want field %s", tt.body, e, tt.field)
		}
		if tt.field == "tokenizer" && !strings.Contains(e.Message, "cl100k_base, o200k_base") {
			t.Errorf("unknown tokenizer message does not list the known ones: %s", e.Message)
		}
	}
	h.Do("POST", "/projects/other/boxes/chat/assemble", map[string]any{"budget": 100, "tokenizer": "cl100k_base"}).Want(t, 404)
}

func TestEntryRoutes(t *testing.T) {
	h := apitest.NewCardBox(t)
	chat(h, "p")
	var box struct {
		Structured bool
		Entries    []struct {
			EntryID string `json:"entry_id"`
			CardID  string `json:"card_id"`
			Zone    string
		} `json:"entries"`
	}
	h.Do("GET", "/projects/p/boxes/chat/entries", nil).Want(t, 200).JSON(t, &box)
	if box.Structured || len(box.Entries) != 5 || box.Entries[0].Zone != "permanent" || box.Entries[2].Zone != "working" {
		t.Fatalf("entries of a plain box: %+v", box)
	}
	var added struct {
		Entries []struct {
			EntryID string `json:"entry_id"`
		} `json:"entries"`
	}
	h.Do("POST", "/projects/p/boxes/chat/entries", map[string]any{"card_ids": []string{"t3"}, "before": box.Entries[2].EntryID, "draft": true}).Want(t, 201).JSON(t, &added)
	h.Do("PATCH", "/projects/p/boxes/chat/entries/"+added.Entries[0].EntryID, map[string]any{"zone": "stable"}).Want(t, 200)
	var got struct {
		CardIDs []string `json:"card_ids"`
	}
	h.Do("GET", "/projects/p/boxes/chat", nil).Want(t, 200).JSON(t, &got)
	if want := []string{"sys", "ask", "t3", "t1", "t2", "t3"}; strings.Join(got.CardIDs, ",") != strings.Join(want, ",") {
		t.Fatalf("card_ids %v, want %v", got.CardIDs, want)
	}
	h.Do("DELETE", "/projects/p/boxes/chat/entries/"+added.Entries[0].EntryID, nil).Want(t, 204)
	h.Do("DELETE", "/projects/p/boxes/chat/entries/"+added.Entries[0].EntryID, nil).Want(t, 404)
	for _, tt := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"card_ids": []string{"t1"}, "zone": "attic"}, "zone"},
		{map[string]any{"card_ids": []string{"t1"}, "zone": "working", "index": 99}, "index"},
		{map[string]any{"card_ids": []string{"t1"}, "after": "e404"}, "after"},
	} {
		e := h.Do("POST", "/projects/p/boxes/chat/entries", tt.body).Want(t, 400).APIError(t)
		if e.Details["field"] != tt.field {
			t.Errorf("%v: %+v, want field %s", tt.body, e, tt.field)
		}
	}
	h.Do("GET", "/projects/other/boxes/chat/entries", nil).Want(t, 404)
	h.Do("POST", "/projects/p/boxes/chat/reorder", map[string]any{"zone": "permanent", "entry_ids": []string{"e2", "e1"}}).Want(t, 200).JSON(t, &box)
	if box.Entries[0].CardID != "ask" {
		t.Fatalf("after reorder: %+v", box.Entries)
	}
}

func TestSnapshotAndDeriveRoutes(t *testing.T) {
	h := apitest.NewCardBox(t)
	chat(h, "p")
	var snap struct {
		SnapshotID string `json:"snapshot_id"`
		Length     int
	}
	h.Do("POST", "/projects/p/boxes/chat/snapshots", map[string]any{"metadata": map[string]any{"step": 1}}).Want(t, 201).JSON(t, &snap)
	h.Do("DELETE", "/projects/p/boxes/chat/entries/e3", nil).Want(t, 204)
	var d struct {
		Removed []struct {
			EntryID string `json:"entry_id"`
		} `json:"removed"`
	}
	h.Do("GET", "/projects/p/boxes/chat/snapshots/"+snap.SnapshotID+"/diff", nil).Want(t, 200).JSON(t, &d)
	if len(d.Removed) != 1 || d.Removed[0].EntryID != "e3" {
		t.Fatalf("diff: %+v", d)
	}
	var list struct{ Snapshots []json.RawMessage }
	h.Do("GET", "/projects/p/boxes/chat/snapshots", nil).Want(t, 200).JSON(t, &list)
	if len(list.Snapshots) != 1 {
		t.Fatalf("snapshots: %+v", list)
	}
	h.Do("GET", "/projects/p/boxes/chat/snapshots/"+snap.SnapshotID, nil).Want(t, 200)
	h.Do("POST", "/projects/p/boxes/chat/restore", map[string]any{"snapshot_id": snap.SnapshotID}).Want(t, 200)
	h.Do("POST", "/projects/p/boxes/copy/restore", map[string]any{"snapshot_id": snap.SnapshotID, "from_box_id": "chat"}).Want(t, 200)
	var derived struct{ Entries []json.RawMessage }
	h.Do("POST", "/projects/p/boxes/next/derive", map[string]any{"from_box_id": "chat"}).Want(t, 200).JSON(t, &derived)
	if len(derived.Entries) != 2 {
		t.Fatalf("derived keeps the permanent zone: %+v", derived)
	}
	var next struct {
		ParentIDs []string `json:"parent_ids"`
	}
	h.Do("GET", "/projects/p/boxes/next", nil).Want(t, 200).JSON(t, &next)
	if len(next.ParentIDs) != 1 || next.ParentIDs[0] != "chat" {
		t.Fatalf("parent_ids %v", next.ParentIDs)
	}
	h.Do("POST", "/projects/p/boxes/x/derive", map[string]any{"context_id": "1"}).Want(t, 404) // no such CXDB context
	h.Do("GET", "/projects/other/boxes/chat/snapshots", nil).Want(t, 404)
}

func TestCardsByContentHashRoute(t *testing.T) {
	h := apitest.NewCardBox(t)
	h.AddCards("p", apitest.Card("a", "agent.thought", "same"), apitest.Card("b", "agent.thought", "same"), apitest.Card("c", "agent.thought", "other"))
	sum, err := rules.ContentHash([]byte(`"same"`))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Cards []struct {
			CardID string `json:"card_id"`
		}
	}
	h.Do("GET", "/projects/p/cards?content_hash="+hex.EncodeToString(sum), nil).Want(t, 200).JSON(t, &got)
	if len(got.Cards) != 2 || got.Cards[0].CardID != "a" || got.Cards[1].CardID != "b" {
		t.Fatalf("cards: %+v", got)
	}
	h.Do("GET", "/projects/p/cards", nil).Want(t, 400)
	h.Do("GET", "/projects/p/cards?content_hash=xyz", nil).Want(t, 400)
}

// TestAssemblePretty: ?pretty indents an assembly's answer (and a card
// read's, also written by hand) as it indents the answers echo encodes:
// the compact answer's bytes through json.Indent with two spaces, so
// the window's hash is still the hash of the compact window.
func TestAssemblePretty(t *testing.T) {
	h := apitest.NewCardBox(t)
	chat(h, "p")
	for _, tt := range []struct{ method, path string }{
		{"POST", "/projects/p/boxes/chat/assemble"},
		{"GET", "/projects/p/cards/t1"},
		{"GET", "/projects/p/boxes/chat"}, // encoded by echo: the reference
	} {
		t.Run(tt.path, func(t *testing.T) {
			var body any
			if tt.method == "POST" {
				body = map[string]any{"budget": 10000, "tokenizer": "cl100k_base", "format": "messages"}
			}
			compact := h.Do(tt.method, tt.path, body).Want(t, 200).Body
			pretty := h.Do(tt.method, tt.path+"?pretty", body).Want(t, 200).Body
			var want bytes.Buffer
			if err := json.Indent(&want, compact, "", "  "); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(pretty, want.Bytes()) || bytes.Equal(pretty, compact) {
				t.Fatalf("?pretty answered\n%s\nwant\n%s", pretty, want.Bytes())
			}
		})
	}
}
