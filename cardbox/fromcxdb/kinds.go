package fromcxdb

import (
	"cmp"
	"encoding/json"
	"regexp"

	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/cxdbcompat/projection"
)

// projectionOptions render turns for cards: payload bytes by length only
// (the typed view is the content), ids as strings, enums as labels.
var projectionOptions = projection.Options{Bytes: "len_only"}

// typeSegment is an item type that may name a card type's segment.
var typeSegment = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// kind is what a turn's projection says a card is.
type kind struct {
	typ, role  string
	toolCalls  json.RawMessage
	toolCallID string
}

// item is the part of a conversation item (cxdb.ConversationItem, the
// type the official clients write) that says who spoke.
type item struct {
	Role     string `json:"role"`
	ItemType string `json:"item_type"`
	ToolCall *struct {
		CallID string `json:"call_id"`
		ID     string `json:"id"`
		Name   string `json:"name"`
		Args   string `json:"args"`
	} `json:"tool_call"`
	ToolResult *struct {
		CallID string `json:"call_id"`
		ID     string `json:"id"`
	} `json:"tool_result"`
}

// classify reads a turn's role and card type from its projection: a
// "role" field when it names a role, else a conversation item's
// item_type (user_input: user; assistant, assistant_turn, handoff:
// assistant; tool_call: an assistant's tool call; tool_result: the
// tool's answer; system: system). Anything else is a user's turn. The
// card type is "cxdb." and the item type ("cxdb.turn" for others): all
// working-zone types, so that assembly may leave old turns out.
func classify(data json.RawMessage) kind {
	var it item
	_ = json.Unmarshal(data, &it) // a projection that is no object is a plain turn
	k := kind{typ: "cxdb.turn", role: rules.RoleUser}
	if typeSegment.MatchString(it.ItemType) {
		k.typ = "cxdb." + it.ItemType
	}
	switch it.ItemType {
	case "assistant", "assistant_turn", "handoff":
		k.role = rules.RoleAssistant
	case "system":
		k.role = rules.RoleSystem
	case "tool_call":
		k.role = rules.RoleAssistant
		if tc := it.ToolCall; tc != nil && cmp.Or(tc.CallID, tc.ID) != "" {
			k.toolCalls, _ = json.Marshal([]map[string]any{{
				"id": cmp.Or(tc.CallID, tc.ID), "type": "function",
				"function": map[string]string{"name": tc.Name, "arguments": tc.Args},
			}})
		}
	case "tool_result":
		k.role = rules.RoleTool
		if tr := it.ToolResult; tr != nil {
			k.toolCallID = cmp.Or(tr.CallID, tr.ID)
		}
	}
	if rules.ValidateRole(it.Role) == nil {
		k.role = it.Role
	}
	return k
}
