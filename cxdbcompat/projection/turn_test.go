package projection

import (
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// fullConversation is a registry of the canonical conversation types
// (spec section 9), mapped to registry types as the spec suggests.
var fullConversation = fakeRegistry{
	types: map[string]Descriptor{
		"cxdb.ConversationItem": descriptor("cxdb.ConversationItem",
			1, "item_type", "string", 2, "status", "string", 3, "timestamp", "unix_ms", 4, "id", "string",
			10, "user_input", "cxdb.UserInput", 11, "turn", "cxdb.AssistantTurn", 12, "system", "cxdb.SystemMessage",
			13, "handoff", "cxdb.HandoffInfo", 20, "assistant", "cxdb.Assistant", 21, "tool_call", "cxdb.ToolCall",
			22, "tool_result", "cxdb.ToolResult", 30, "context_metadata", "cxdb.ContextMetadata"),
		"cxdb.UserInput": descriptor("cxdb.UserInput", 1, "text", "string", 2, "files", "[]string"),
		"cxdb.AssistantTurn": descriptor("cxdb.AssistantTurn",
			1, "text", "string", 2, "tool_calls", "[]cxdb.ToolCallItem", 3, "reasoning", "string",
			4, "metrics", "cxdb.TurnMetrics", 5, "agent", "string", 6, "turn_number", "int32",
			7, "max_turns", "int32", 8, "finish_reason", "string"),
		"cxdb.ToolCallItem": descriptor("cxdb.ToolCallItem",
			1, "id", "string", 2, "name", "string", 3, "args", "string", 4, "status", "string",
			5, "description", "string", 6, "streaming_output", "string", 7, "streaming_output_truncated", "bool",
			8, "result", "cxdb.ToolCallResult", 9, "error", "cxdb.ToolCallError", 10, "duration_ms", "int64"),
		"cxdb.ToolCallResult": descriptor("cxdb.ToolCallResult",
			1, "content", "string", 2, "content_truncated", "bool", 3, "success", "bool", 4, "exit_code", "int32"),
		"cxdb.ToolCallError": descriptor("cxdb.ToolCallError", 1, "code", "string", 2, "message", "string", 3, "exit_code", "int32"),
		"cxdb.TurnMetrics": descriptor("cxdb.TurnMetrics",
			1, "input_tokens", "int64", 2, "output_tokens", "int64", 3, "total_tokens", "int64",
			4, "cached_tokens", "int64", 5, "reasoning_tokens", "int64", 6, "duration_ms", "int64", 7, "model", "string"),
		"cxdb.SystemMessage": descriptor("cxdb.SystemMessage", 1, "kind", "string", 2, "title", "string", 3, "content", "string"),
		"cxdb.HandoffInfo": descriptor("cxdb.HandoffInfo",
			1, "from_agent", "string", 2, "to_agent", "string", 3, "tool_name", "string", 4, "input", "string", 5, "reason", "string"),
		"cxdb.Assistant": descriptor("cxdb.Assistant",
			1, "text", "string", 2, "reasoning", "string", 3, "model", "string",
			4, "input_tokens", "int64", 5, "output_tokens", "int64", 6, "stop_reason", "string"),
		"cxdb.ToolCall": descriptor("cxdb.ToolCall", 1, "call_id", "string", 2, "name", "string", 3, "args", "string", 4, "description", "string"),
		"cxdb.ToolResult": descriptor("cxdb.ToolResult",
			1, "call_id", "string", 2, "content", "string", 3, "is_error", "bool", 4, "exit_code", "int32",
			5, "streaming_output", "string", 6, "output_truncated", "bool", 7, "duration_ms", "int64"),
		"cxdb.ContextMetadata": descriptor("cxdb.ContextMetadata",
			1, "client_tag", "string", 2, "title", "string", 3, "labels", "[]string", 4, "custom", "map"),
		"fuzz.All": fuzzDescriptor,
	},
	enums: map[string]map[string]string{"color": {"1": "red", "2": "gr\xffeen"}},
}

// descriptor builds a descriptor from tag, name, type triples; a type
// "cxdb.X" is a ref to it, "[]T" an array of T.
func descriptor(id string, spec ...any) Descriptor {
	d := Descriptor{TypeID: id, Version: 1, Fields: map[uint64]Field{}}
	for i := 0; i < len(spec); i += 3 {
		f := Field{Name: spec[i+1].(string), Type: spec[i+2].(string)}
		if items, ok := strings.CutPrefix(f.Type, "[]"); ok {
			f.Type, f.Items = "array", &registry.Items{Type: items}
			if strings.HasPrefix(items, "cxdb.") {
				f.Items = &registry.Items{Type: "ref", Ref: items}
			}
		} else if strings.HasPrefix(f.Type, "cxdb.") {
			f.Type, f.Ref = "ref", f.Type
		}
		d.Fields[uint64(spec[i].(int))] = f
	}
	return d
}

// conversationTurn is an assistant turn of about 1 KiB as the Go client
// writes it: three tool calls with arguments and results, and metrics.
func conversationTurn(t testing.TB) []byte {
	t.Helper()
	call := func(id, name, args, content string, exit any, ms int64) tagged {
		return tagged{1, id, 2, name, 3, args, 4, "complete", 5, "", 6, "", 7, false,
			8, tagged{1, content, 2, false, 3, true, 4, exit}, 9, nil, 10, ms}
	}
	turn := tagged{
		1, "I looked at the failing test: the parser rejects a trailing comma in the \"deps\" list. I fixed it and the suite passes now.",
		2, []tagged{
			call("call_01", "read_file", `{"path":"internal/parse/deps.go","offset":0,"limit":200}`,
				"package parse\n\nfunc Deps(s string) ([]string, error) {\n\tparts := strings.Split(s, \",\")\n", nil, 12),
			call("call_02", "edit_file", `{"path":"internal/parse/deps.go","old":"parts := strings.Split(s, \",\")","new":"parts := splitTrim(s)"}`,
				"ok: 1 replacement", nil, 31),
			call("call_03", "bash", `{"command":"go test ./internal/parse/...","timeout_ms":120000}`,
				"ok  \texample.com/app/internal/parse\t0.412s\n", 0, 2417),
		},
		3, "The split keeps an empty last element; trimming it is the smallest fix <& keeps the API>.",
		4, tagged{1, int64(5123), 2, int64(412), 3, int64(5535), 4, int64(4096), 5, nil, 6, int64(9312), 7, "claude-sonnet-4"},
		5, "coder", 6, 7, 7, 50, 8, "end_turn",
	}
	item := tagged{1, "assistant_turn", 2, "complete", 3, int64(1700000000123), 4, "item-0193",
		10, nil, 11, turn, 12, nil, 13, nil, 20, nil, 21, nil, 22, nil, 30, nil}
	return enc(t, item)
}

func TestConversationTurn1KiB(t *testing.T) {
	payload := conversationTurn(t)
	if len(payload) < 1000 || len(payload) > 1050 {
		t.Fatalf("payload of %d bytes, want about 1 KiB", len(payload))
	}
	d := fullConversation.types["cxdb.ConversationItem"]
	r, err := Project(payload, d, fullConversation, Options{IncludeUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"assistant":null,"context_metadata":null,"handoff":null,"id":"item-0193"` +
		`,"item_type":"assistant_turn","status":"complete","system":null` +
		`,"timestamp":"2023-11-14T22:13:20.123+00:00","tool_call":null,"tool_result":null` +
		`,"turn":{"agent":"coder","finish_reason":"end_turn","max_turns":50,"metrics":{"cached_tokens":"4096"` +
		`,"duration_ms":"9312","input_tokens":"5123","model":"claude-sonnet-4","output_tokens":"412"` +
		`,"reasoning_tokens":null,"total_tokens":"5535"}` +
		`,"reasoning":"The split keeps an empty last element; trimming it is the smallest fix <& keeps the API>."` +
		`,"text":"I looked at the failing test: the parser rejects a trailing comma in the \"deps\" list. I fixed it and the suite passes now."` +
		`,"tool_calls":[{"args":"{\"path\":\"internal/parse/deps.go\",\"offset\":0,\"limit\":200}"` +
		`,"description":"","duration_ms":"12","error":null,"id":"call_01","name":"read_file"` +
		`,"result":{"content":"package parse\n\nfunc Deps(s string) ([]string, error) {\n\tparts := strings.Split(s, \",\")\n"` +
		`,"content_truncated":false,"exit_code":null,"success":true},"status":"complete"` +
		`,"streaming_output":""` +
		`,"streaming_output_truncated":false},{"args":"{\"path\":\"internal/parse/deps.go\",\"old\":\"parts := strings.Split(s, \\\",\\\")\",\"new\":\"parts := splitTrim(s)\"}"` +
		`,"description":"","duration_ms":"31","error":null,"id":"call_02","name":"edit_file"` +
		`,"result":{"content":"ok: 1 replacement","content_truncated":false,"exit_code":null,"success":true}` +
		`,"status":"complete","streaming_output":""` +
		`,"streaming_output_truncated":false},{"args":"{\"command\":\"go test ./internal/parse/...\",\"timeout_ms\":120000}"` +
		`,"description":"","duration_ms":"2417","error":null,"id":"call_03","name":"bash"` +
		`,"result":{"content":"ok  \texample.com/app/internal/parse\t0.412s\n","content_truncated":false` +
		`,"exit_code":0,"success":true},"status":"complete","streaming_output":""` +
		`,"streaming_output_truncated":false}],"turn_number":7},"user_input":null}`
	if string(r.Data) != want {
		t.Fatalf("data =\n%s\nwant\n%s", r.Data, want)
	}
	if string(r.Unknown) != `{}` {
		t.Fatalf("unknown = %s", r.Unknown)
	}
	for _, o := range fuzzOptions {
		sameAsOracle(t, payload, d, fullConversation, o)
	}
}
