package typedjson

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/vmihailenco/msgpack/v5"
)

// Go structs mirroring clients/go/types (reference §9). The tags add
// omitempty so the reference encoding contains only the fields the JSON
// sets: the official client writes every field, unset ones as nil or zero,
// whereas an HTTP write omits absent fields. Bools that are set to false use
// pointers so omitempty keeps them.
type goItem struct {
	ItemType        string       `msgpack:"1,omitempty"`
	Status          string       `msgpack:"2,omitempty"`
	Timestamp       int64        `msgpack:"3,omitempty"`
	ID              string       `msgpack:"4,omitempty"`
	UserInput       *goUserInput `msgpack:"10,omitempty"`
	Turn            *goTurn      `msgpack:"11,omitempty"`
	ContextMetadata *goMeta      `msgpack:"30,omitempty"`
}

type goUserInput struct {
	Text  string   `msgpack:"1,omitempty"`
	Files []string `msgpack:"2,omitempty"`
}

type goTurn struct {
	Text         string       `msgpack:"1,omitempty"`
	ToolCalls    []goToolCall `msgpack:"2,omitempty"`
	Reasoning    string       `msgpack:"3,omitempty"`
	Metrics      *goMetrics   `msgpack:"4,omitempty"`
	Agent        string       `msgpack:"5,omitempty"`
	TurnNumber   int          `msgpack:"6,omitempty"`
	MaxTurns     int          `msgpack:"7,omitempty"`
	FinishReason string       `msgpack:"8,omitempty"`
}

type goToolCall struct {
	ID                       string    `msgpack:"1,omitempty"`
	Name                     string    `msgpack:"2,omitempty"`
	Args                     string    `msgpack:"3,omitempty"`
	Status                   string    `msgpack:"4,omitempty"`
	Description              string    `msgpack:"5,omitempty"`
	StreamingOutput          string    `msgpack:"6,omitempty"`
	StreamingOutputTruncated *bool     `msgpack:"7,omitempty"`
	Result                   *goResult `msgpack:"8,omitempty"`
	Error                    *goError  `msgpack:"9,omitempty"`
	DurationMs               int64     `msgpack:"10,omitempty"`
}

type goResult struct {
	Content          string `msgpack:"1,omitempty"`
	ContentTruncated *bool  `msgpack:"2,omitempty"`
	Success          *bool  `msgpack:"3,omitempty"`
	ExitCode         *int   `msgpack:"4,omitempty"`
}

type goError struct {
	Code     string `msgpack:"1,omitempty"`
	Message  string `msgpack:"2,omitempty"`
	ExitCode *int   `msgpack:"3,omitempty"`
}

type goMetrics struct {
	InputTokens     int64  `msgpack:"1,omitempty"`
	OutputTokens    int64  `msgpack:"2,omitempty"`
	TotalTokens     int64  `msgpack:"3,omitempty"`
	CachedTokens    *int64 `msgpack:"4,omitempty"`
	ReasoningTokens *int64 `msgpack:"5,omitempty"`
	DurationMs      *int64 `msgpack:"6,omitempty"`
	Model           string `msgpack:"7,omitempty"`
}

type goMeta struct {
	ClientTag string            `msgpack:"1,omitempty"`
	Title     string            `msgpack:"2,omitempty"`
	Labels    []string          `msgpack:"3,omitempty"`
	Custom    map[string]string `msgpack:"4,omitempty"`
}

// conversationTypes registers the §9 types with the suggested mapping: Go
// int fields get a type the projection renders generically ("int"), which
// reproduces the client's compact encoding.
var conversationTypes = fakeTypes{latest: map[string]registry.Descriptor{
	"cxdb.ConversationItem": desc("cxdb.ConversationItem", map[uint64]registry.Field{
		1: str("item_type"), 2: str("status"), 3: typed("timestamp", "unix_ms"), 4: str("id"),
		10: ref("user_input", "cxdb.UserInput"), 11: ref("turn", "cxdb.AssistantTurn"),
		30: ref("context_metadata", "cxdb.ContextMetadata"),
	}),
	"cxdb.UserInput": desc("cxdb.UserInput", map[uint64]registry.Field{
		1: str("text"), 2: arrayOf("files", &registry.Items{Type: "string"}),
	}),
	"cxdb.AssistantTurn": desc("cxdb.AssistantTurn", map[uint64]registry.Field{
		1: str("text"), 2: arrayOf("tool_calls", &registry.Items{Type: "ref", Ref: "cxdb.ToolCallItem"}),
		3: str("reasoning"), 4: ref("metrics", "cxdb.TurnMetrics"), 5: str("agent"),
		6: typed("turn_number", "int"), 7: typed("max_turns", "int"), 8: str("finish_reason"),
	}),
	"cxdb.ToolCallItem": desc("cxdb.ToolCallItem", map[uint64]registry.Field{
		1: str("id"), 2: str("name"), 3: str("args"), 4: str("status"), 5: str("description"),
		6: str("streaming_output"), 7: typed("streaming_output_truncated", "bool"),
		8: ref("result", "cxdb.ToolCallResult"), 9: ref("error", "cxdb.ToolCallError"),
		10: typed("duration_ms", "int64"),
	}),
	"cxdb.ToolCallResult": desc("cxdb.ToolCallResult", map[uint64]registry.Field{
		1: str("content"), 2: typed("content_truncated", "bool"), 3: typed("success", "bool"),
		4: typed("exit_code", "int"),
	}),
	"cxdb.ToolCallError": desc("cxdb.ToolCallError", map[uint64]registry.Field{
		1: str("code"), 2: str("message"), 3: typed("exit_code", "int"),
	}),
	"cxdb.TurnMetrics": desc("cxdb.TurnMetrics", map[uint64]registry.Field{
		1: typed("input_tokens", "int64"), 2: typed("output_tokens", "int64"),
		3: typed("total_tokens", "int64"), 4: typed("cached_tokens", "int64"),
		5: typed("reasoning_tokens", "int64"), 6: typed("duration_ms", "int64"), 7: str("model"),
	}),
	"cxdb.ContextMetadata": desc("cxdb.ContextMetadata", map[uint64]registry.Field{
		1: str("client_tag"), 2: str("title"), 3: arrayOf("labels", &registry.Items{Type: "string"}),
		4: typed("custom", "map"),
	}),
}}

// canonicalJSON is a ConversationItem as the typed view renders it under
// default options (int64 as strings, time as ISO), with keys deliberately
// out of order.
const canonicalJSON = `{
  "turn": {
    "finish_reason": "tool_use",
    "tool_calls": [
      {"status": "complete", "name": "bash", "id": "call_1", "args": "{\"cmd\":\"ls\"}",
       "duration_ms": "1500", "streaming_output_truncated": false,
       "result": {"success": true, "content": "a\nb", "content_truncated": false, "exit_code": 0}},
      {"id": "call_2", "name": "read", "status": "error", "duration_ms": 7,
       "error": {"message": "no such file", "code": "ENOENT", "exit_code": -2}}
    ],
    "text": "Let me look.",
    "metrics": {"model": "claude", "input_tokens": "1200", "output_tokens": 80,
                "total_tokens": "1280", "cached_tokens": "0", "duration_ms": 4000000000},
    "turn_number": 3, "max_turns": 300, "agent": "main"
  },
  "timestamp": "2023-11-14T22:13:20.123+00:00",
  "item_type": "assistant_turn",
  "status": "complete",
  "id": "item-1",
  "context_metadata": {"title": "t", "client_tag": "cli", "labels": ["x", "y"],
                       "custom": {"b": "2", "a": "1"}}
}`

func canonicalGo() goItem {
	f, t := false, true
	zero, neg2 := 0, -2
	var cached, dur int64 = 0, 4000000000
	return goItem{
		ItemType: "assistant_turn", Status: "complete", Timestamp: 1700000000123, ID: "item-1",
		Turn: &goTurn{
			Text: "Let me look.",
			ToolCalls: []goToolCall{
				{ID: "call_1", Name: "bash", Args: `{"cmd":"ls"}`, Status: "complete",
					StreamingOutputTruncated: &f, DurationMs: 1500,
					Result: &goResult{Content: "a\nb", ContentTruncated: &f, Success: &t, ExitCode: &zero}},
				{ID: "call_2", Name: "read", Status: "error", DurationMs: 7,
					Error: &goError{Code: "ENOENT", Message: "no such file", ExitCode: &neg2}},
			},
			Metrics: &goMetrics{InputTokens: 1200, OutputTokens: 80, TotalTokens: 1280,
				CachedTokens: &cached, DurationMs: &dur, Model: "claude"},
			Agent: "main", TurnNumber: 3, MaxTurns: 300, FinishReason: "tool_use",
		},
		ContextMetadata: &goMeta{ClientTag: "cli", Title: "t", Labels: []string{"x", "y"},
			Custom: map[string]string{"a": "1", "b": "2"}},
	}
}

// TestEncodeMatchesGoClient compares byte for byte with vmihailenco's
// encoding of the same values from tagged Go structs. Map keys are sorted
// on the reference encoder only for the generic "custom" map (the Go client
// writes Go maps in random order).
func TestEncodeMatchesGoClient(t *testing.T) {
	item := canonicalGo()
	var want bytes.Buffer
	enc := msgpack.NewEncoder(&want)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(&item); err != nil {
		t.Fatal(err)
	}
	d, _ := conversationTypes.Latest("cxdb.ConversationItem")
	got, err := Encode([]byte(canonicalJSON), d, conversationTypes)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("bytes differ\ngot  %s\nwant %s", hex.EncodeToString(got), hex.EncodeToString(want.Bytes()))
	}
	var back goItem
	if err := msgpack.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, item) {
		t.Fatalf("decoded %+v\nwant %+v", back, item)
	}
}

// TestEncodeReadsAsGoClientTurn decodes an encoding into the client's
// struct without omitempty, as a reader built on the official types would.
func TestEncodeReadsAsGoClientTurn(t *testing.T) {
	type metrics struct {
		InputTokens  int64  `msgpack:"1"`
		CachedTokens *int64 `msgpack:"4"`
		Model        string `msgpack:"7"`
	}
	type turn struct {
		Metrics    *metrics `msgpack:"4"`
		TurnNumber int      `msgpack:"6"`
	}
	type item struct {
		ItemType  string `msgpack:"1"`
		Timestamp int64  `msgpack:"3"`
		Turn      *turn  `msgpack:"11"`
	}
	d, _ := conversationTypes.Latest("cxdb.ConversationItem")
	got, err := Encode([]byte(canonicalJSON), d, conversationTypes)
	if err != nil {
		t.Fatal(err)
	}
	var back item
	if err := msgpack.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if back.ItemType != "assistant_turn" || back.Timestamp != 1700000000123 || back.Turn == nil ||
		back.Turn.TurnNumber != 3 || back.Turn.Metrics == nil || back.Turn.Metrics.InputTokens != 1200 ||
		back.Turn.Metrics.CachedTokens == nil || *back.Turn.Metrics.CachedTokens != 0 {
		t.Fatalf("decoded %+v", back)
	}
}
