package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	cxdb "github.com/strongdm/ai-cxdb/clients/go"
	"github.com/strongdm/ai-cxdb/clients/go/types"
)

// httpJSON sends a request with a JSON body to the server's HTTP listener
// and returns the status and body.
func httpJSON(t *testing.T, s *server, method, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.httpAddr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, out
}

// A conversation written by the official Go client becomes a box (each
// turn a card, once), and the box assembles like any other.
func TestDeriveBoxFromOfficialClientContext(t *testing.T) {
	s := startServer(t, nil)
	bundle, err := os.ReadFile("../../cxdbcompat/registry/conversation_bundle.json")
	if err != nil {
		t.Fatal(err)
	}
	if st, body := httpJSON(t, s, "PUT", "/v1/registry/bundles/cxdb-conversation-v3", bundle); st != 201 && st != 200 {
		t.Fatalf("publish bundle: %d %s", st, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cxdb.Dial(s.binAddr, cxdb.WithClientTag("derive"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var turnIDs []uint64
	for i, item := range []*types.ConversationItem{
		types.NewUserInput("What is the capital of Portugal?"),
		types.NewAssistantTurn("Lisbon."),
		types.NewUserInput("And its population?"),
		types.NewAssistantTurn("About 550,000 in the city proper."),
	} {
		payload, err := cxdb.EncodeMsgpack(item)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.AppendTurn(ctx, &cxdb.AppendRequest{
			ContextID: head.ContextID, TypeID: types.TypeIDConversationItem, TypeVersion: types.TypeVersionConversationItem,
			Payload: payload, IdempotencyKey: fmt.Sprint("derive-", i),
		})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		turnIDs = append(turnIDs, res.TurnID)
	}
	derive := func(upTo uint64) []byte {
		body, _ := json.Marshal(map[string]string{
			"context_id": strconv.FormatUint(head.ContextID, 10), "up_to_turn_id": strconv.FormatUint(upTo, 10),
		})
		st, out := httpJSON(t, s, "POST", "/projects/default/boxes/conversation/derive", body)
		if st != 200 {
			t.Fatalf("derive: %d %s", st, out)
		}
		return out
	}
	var box struct {
		Entries []struct {
			CardID string `json:"card_id"`
			Zone   string `json:"zone"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(derive(turnIDs[2]), &box); err != nil {
		t.Fatal(err)
	}
	if len(box.Entries) != 3 || box.Entries[0].CardID != fmt.Sprint("cxdb-turn-", turnIDs[0]) || box.Entries[0].Zone != "working" {
		t.Fatalf("box up to the third turn: %+v", box)
	}
	first := derive(turnIDs[3])
	again := derive(turnIDs[3])
	if !bytes.Equal(bytesWithoutTime(first), bytesWithoutTime(again)) {
		t.Fatalf("deriving twice differs:\n%s\n%s", first, again)
	}
	st, out := httpJSON(t, s, "GET", "/projects/default/cards/"+fmt.Sprint("cxdb-turn-", turnIDs[1]), nil)
	var card struct {
		Role     string `json:"role"`
		Content  json.RawMessage
		Metadata struct {
			Type string `json:"type"`
			CXDB struct {
				TurnID    string `json:"turn_id"`
				ContextID string `json:"context_id"`
			} `json:"cxdb"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(out, &card); st != 200 || err != nil {
		t.Fatalf("derived card: %d %s", st, out)
	}
	if card.Role != "assistant" || card.Metadata.Type != "cxdb.assistant_turn" || card.Metadata.CXDB.TurnID != fmt.Sprint(turnIDs[1]) ||
		!bytes.Contains(card.Content, []byte("Lisbon.")) {
		t.Fatalf("derived card: %s", out)
	}
	st, out = httpJSON(t, s, "POST", "/projects/default/boxes/conversation/assemble",
		[]byte(`{"budget": 100000, "tokenizer": "o200k_base", "format": "messages"}`))
	var window struct {
		Messages []struct{ Role string } `json:"messages"`
	}
	if err := json.Unmarshal(out, &window); st != 200 || err != nil || len(window.Messages) != 4 || window.Messages[0].Role != "user" {
		t.Fatalf("assemble: %d %s", st, out)
	}
	// Another project (tenant) does not see the context.
	body, _ := json.Marshal(map[string]string{"context_id": strconv.FormatUint(head.ContextID, 10)})
	if st, out := httpJSON(t, s, "POST", "/projects/other/boxes/conversation/derive", body); st != 404 {
		t.Fatalf("another tenant's context: %d %s", st, out)
	}
}

// bytesWithoutTime drops the updated_at member of a box's entries answer.
func bytesWithoutTime(b []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	delete(m, "updated_at")
	out, _ := json.Marshal(m)
	return out
}
