package cardbox

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/cardboxhq/cardbox/cardbox/rules"
)

// normalCard is a NewCard validated and normalized for storage and for
// comparison with a stored card.
type normalCard struct {
	id         string
	content    []byte // nil for JSON null
	toolCalls  []byte // nil for JSON null
	toolCallID string
	ttl        int32
	metadata   []byte // a JSON object with type and role
	// cxdbContext and cxdbTurn name the CXDB turn a derived card was
	// made from; 0 for other cards.
	cxdbContext, cxdbTurn uint64
}

// normalize validates c and returns its stored form.
func normalize(c NewCard) (normalCard, error) {
	n := normalCard{id: c.CardID, toolCallID: c.ToolCallID}
	if err := rules.ValidateID("card_id", c.CardID); err != nil {
		return n, err
	}
	var err error
	if n.content, err = optionalJSON("content", c.Content); err != nil {
		return n, err
	}
	if n.toolCalls, err = optionalJSON("tool_calls", c.ToolCalls); err != nil {
		return n, err
	}
	if n.toolCalls != nil && n.toolCalls[0] != '[' {
		return n, rules.Invalid("tool_calls", "must be an array or null")
	}
	if c.TTLSeconds < 0 || c.TTLSeconds > rules.MaxTTLSeconds {
		return n, rules.Invalid("ttl_seconds", "must be between 1 and %d (0 or absent: never expires)", rules.MaxTTLSeconds)
	}
	n.ttl = int32(c.TTLSeconds)
	if len(c.ToolCallID) > rules.MaxIDLength {
		return n, rules.Invalid("tool_call_id", "is longer than %d bytes", rules.MaxIDLength)
	}
	n.metadata, err = normalizeMetadata(c.Metadata)
	return n, err
}

// optionalJSON checks raw and returns it compacted, or nil for absent/null.
func optionalJSON(field string, raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, rules.Invalid(field, "is not valid JSON: %v", err)
	}
	return buf.Bytes(), nil
}

// normalizeMetadata checks type, role and author_id, fills in the role of
// a standard type when absent, and returns the object with sorted keys.
func normalizeMetadata(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, rules.Invalid("metadata", "is required: an object with type and role")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, rules.Invalid("metadata", "must be a JSON object with type and role")
	}
	typ, err := metadataString(m, "type")
	if err != nil {
		return nil, err
	}
	if err := rules.ValidateType(typ); err != nil {
		return nil, err
	}
	role, err := metadataString(m, "role")
	if err != nil {
		return nil, err
	}
	if role == "" {
		if role = rules.StandardTypes[typ]; role == "" {
			return nil, rules.Invalid("metadata.role", "is required for custom type %q: one of system, user, assistant, tool", typ)
		}
		m["role"], _ = json.Marshal(role)
	}
	if err := rules.ValidateRole(role); err != nil {
		return nil, err
	}
	if _, err := metadataString(m, "author_id"); err != nil {
		return nil, err
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	return out, rules.CheckMetadataSize(out)
}

// metadataString reads a string member of metadata; absent and null read
// as "".
func metadataString(m map[string]json.RawMessage, key string) (string, error) {
	raw, ok := m[key]
	if !ok || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", rules.Invalid("metadata."+key, "must be a string")
	}
	return s, nil
}
