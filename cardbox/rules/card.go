package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// StoredCard is a card to write, validated and normalized for storage and
// for comparison with a stored card.
type StoredCard struct {
	ID         string
	Content    []byte // nil for JSON null
	ToolCalls  []byte // nil for JSON null
	ToolCallID string
	TTL        int32  // seconds; 0: never expires
	Metadata   []byte // a JSON object with type and role
}

// NormalizeCard validates a card to write (its id, content, tool calls,
// the id of the call it answers, its time to live in seconds and its
// metadata) and returns its stored form.
func NormalizeCard(id string, content, toolCalls json.RawMessage, toolCallID string, ttlSeconds int, metadata json.RawMessage) (StoredCard, error) {
	n := StoredCard{ID: id, ToolCallID: toolCallID}
	if err := ValidateID("card_id", id); err != nil {
		return n, err
	}
	var err error
	if n.Content, err = OptionalJSON("content", content); err != nil {
		return n, err
	}
	if n.ToolCalls, err = OptionalJSON("tool_calls", toolCalls); err != nil {
		return n, err
	}
	if n.ToolCalls != nil && n.ToolCalls[0] != '[' {
		return n, Invalid("tool_calls", "must be an array or null")
	}
	if ttlSeconds < 0 || ttlSeconds > MaxTTLSeconds {
		return n, Invalid("ttl_seconds", "must be between 1 and %d (0 or absent: never expires)", MaxTTLSeconds)
	}
	n.TTL = int32(ttlSeconds)
	if len(toolCallID) > MaxIDLength {
		return n, Invalid("tool_call_id", "is longer than %d bytes", MaxIDLength)
	}
	n.Metadata, err = normalizeMetadata(metadata)
	return n, err
}

// OptionalJSON checks raw and returns it compacted, or nil for absent/null.
func OptionalJSON(field string, raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, Invalid(field, "is not valid JSON: %v", err)
	}
	return buf.Bytes(), nil
}

// normalizeMetadata checks type, role and author_id, fills in the role of
// a standard type when absent, and returns the object with sorted keys.
func normalizeMetadata(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, Invalid("metadata", "is required: an object with type and role")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, Invalid("metadata", "must be a JSON object with type and role")
	}
	typ, err := metadataString(m, "type")
	if err != nil {
		return nil, err
	}
	if err := ValidateType(typ); err != nil {
		return nil, err
	}
	role, err := metadataString(m, "role")
	if err != nil {
		return nil, err
	}
	if role == "" {
		if role = StandardTypes[typ]; role == "" {
			return nil, Invalid("metadata.role", "is required for custom type %q: one of system, user, assistant, tool", typ)
		}
		m["role"], _ = json.Marshal(role)
	}
	if err := ValidateRole(role); err != nil {
		return nil, err
	}
	if _, err := metadataString(m, "author_id"); err != nil {
		return nil, err
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	return out, CheckMetadataSize(out)
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
		return "", Invalid("metadata."+key, "must be a string")
	}
	return s, nil
}
