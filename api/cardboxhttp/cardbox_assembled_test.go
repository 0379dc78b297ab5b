package cardboxhttp

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/cardboxhq/cardbox/cardbox/assembly"
	"github.com/cardboxhq/cardbox/cardbox/layout"
)

// TestAssembledAnswerIsWhatEncodingJSONWrites: appendAssembled writes the
// bytes encoding/json's Encoder wrote for the answer's struct before it
// (kept here as the oracle), HTML-escaping characters and all, so that
// the same assembly is still the same bytes.
func TestAssembledAnswerIsWhatEncodingJSONWrites(t *testing.T) {
	window := json.RawMessage(`[{"role":"user","content":"a \u003cb\u003e \u0026 \u2028"},{"role":"assistant","content":null,"tool_calls":[{"id":"1"}]}]`)
	for _, tt := range []struct {
		name string
		a    assembly.Assembled
	}{
		{"empty box", assembly.Assembled{BoxID: "b", Tokenizer: "cl100k_base", Format: assembly.FormatCards, Budget: 1,
			EntryIDs: []string{}, Window: json.RawMessage(`[]`), Hash: "blake3:00", LeftOut: []assembly.LeftOut{}}},
		{"messages, every reason", assembly.Assembled{BoxID: "box<&>\u2028", Tokenizer: "o200k_base", Format: assembly.FormatMessages,
			Budget: 300, Tokens: 290, Zones: [3]assembly.ZoneTotal{{Entries: 1, Tokens: 100}, {}, {Entries: 2, Tokens: 190}},
			EntryIDs: []string{"e1", "e<3>", "é\"\\"}, Window: window, Hash: "blake3:ab",
			LeftOut: []assembly.LeftOut{
				{EntryID: "e2", CardID: "c&2", Zone: layout.ZoneWorking, Reason: assembly.LeftOutBudget, Tokens: 40},
				{EntryID: "e4", CardID: "c4", Zone: layout.ZoneStable, Reason: assembly.LeftOutDraft},
				{EntryID: "e5", CardID: "c\x01", Zone: layout.ZonePermanent, Reason: assembly.LeftOutDeleted},
				{EntryID: "e6", CardID: "c6", Zone: layout.ZoneWorking, Reason: assembly.LeftOutExpired},
				{EntryID: "e7", CardID: "c7", Zone: layout.ZoneWorking, Reason: assembly.LeftOutMissing},
			}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, project := range []string{"p", "<project & co>"} {
				got := appendAssembled(nil, project, &tt.a)
				if want := encodeAssembledAsBefore(t, project, tt.a); !bytes.Equal(got, want) {
					t.Errorf("project %q:\n got %s\nwant %s", project, got, want)
				}
			}
		})
	}
}

// encodeAssembledAsBefore is how the assembly answer was written before
// appendAssembled: a struct through echo's JSON serializer (a
// json.Encoder, with its trailing newline).
func encodeAssembledAsBefore(t *testing.T, project string, a assembly.Assembled) []byte {
	t.Helper()
	type zoneTotalJSON struct {
		Entries int `json:"entries"`
		Tokens  int `json:"tokens"`
	}
	type leftOutJSON struct {
		EntryID string `json:"entry_id"`
		CardID  string `json:"card_id"`
		Zone    string `json:"zone"`
		Reason  string `json:"reason"`
		Tokens  int    `json:"tokens"`
	}
	out := struct {
		ProjectID string                   `json:"project_id"`
		BoxID     string                   `json:"box_id"`
		Tokenizer string                   `json:"tokenizer"`
		Format    string                   `json:"format"`
		Budget    int                      `json:"budget"`
		Tokens    int                      `json:"tokens"`
		Zones     map[string]zoneTotalJSON `json:"zones"`
		EntryIDs  []string                 `json:"entry_ids"`
		Cards     json.RawMessage          `json:"cards,omitempty"`
		Messages  json.RawMessage          `json:"messages,omitempty"`
		LeftOut   []leftOutJSON            `json:"left_out"`
		Hash      string                   `json:"hash"`
	}{
		ProjectID: project, BoxID: a.BoxID, Tokenizer: a.Tokenizer, Format: a.Format, Budget: a.Budget,
		Tokens: a.Tokens, Zones: map[string]zoneTotalJSON{}, EntryIDs: a.EntryIDs, LeftOut: make([]leftOutJSON, len(a.LeftOut)), Hash: a.Hash,
	}
	for z, total := range a.Zones {
		out.Zones[layout.Zone(z).String()] = zoneTotalJSON{Entries: total.Entries, Tokens: total.Tokens}
	}
	for i, l := range a.LeftOut {
		out.LeftOut[i] = leftOutJSON{EntryID: l.EntryID, CardID: l.CardID, Zone: l.Zone.String(), Reason: l.Reason, Tokens: l.Tokens}
	}
	if a.Format == assembly.FormatMessages {
		out.Messages = a.Window
	} else {
		out.Cards = a.Window
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(out); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
