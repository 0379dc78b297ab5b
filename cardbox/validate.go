package cardbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of the API.
const (
	// MaxBatchIDs is the most ids a batch read may name.
	MaxBatchIDs = 100
	// MaxAddCards is the most cards one AddCards call may write.
	MaxAddCards = 100
	// MaxIDLength is the longest card, box or project id, in bytes.
	MaxIDLength = 255
	// MaxTypeLength is the longest metadata.type, in bytes.
	MaxTypeLength = 128
	// MaxTTLSeconds is the longest card time to live.
	MaxTTLSeconds = 1<<31 - 1
	// MaxBoxCards is the most card ids a box holds. It bounds what one
	// box read answers and what a box write costs.
	MaxBoxCards = 10_000
	// MaxBoxParents is the most parent ids a box names.
	MaxBoxParents = 1_000
	// MaxMetadataBytes caps the metadata of a card or a box, as compact
	// JSON.
	MaxMetadataBytes = 64 << 10
)

// Roles the LLM sees (metadata.role).
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// StandardTypes are the card types of the L0 protocol with the role each
// one is written with. A card of a standard type without metadata.role gets
// this role.
var StandardTypes = map[string]string{
	"task.instruction":    RoleUser,
	"agent.thought":       RoleAssistant,
	"tool.call":           RoleAssistant,
	"tool.result":         RoleTool,
	"task.deliverable":    RoleAssistant,
	"sys.profile":         RoleSystem,
	"sys.rendered_prompt": RoleSystem,
	"sys.tools":           RoleSystem,
	"meta.parent_pointer": RoleSystem,
	"task.result_fields":  RoleSystem,
}

// namespacedType is a custom type: dot-separated segments.
var namespacedType = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$`)

// ValidateType checks a card type: a standard type, or a custom one
// namespaced with a dot ("myapp.note").
func ValidateType(t string) error {
	if t == "" {
		return invalid("metadata.type", "is required (a standard type such as \"task.instruction\", or a namespaced custom type such as \"myapp.note\")")
	}
	if _, ok := StandardTypes[t]; ok {
		return nil
	}
	if len(t) > MaxTypeLength || !namespacedType.MatchString(t) {
		return invalid("metadata.type", "%q is not a standard type; custom types must be namespaced with a dot (e.g. \"myapp.%s\"), using letters, digits, '_' and '-', at most %d bytes",
			t, strings.Trim(t, "."), MaxTypeLength)
	}
	return nil
}

// ValidateRole checks metadata.role.
func ValidateRole(r string) error {
	switch r {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		return nil
	}
	return invalid("metadata.role", "%q is not a role; use one of system, user, assistant, tool", r)
}

// ValidateID checks a card, box or project id: 1 to MaxIDLength bytes of
// UTF-8 without control characters, spaces or '/'.
func ValidateID(field, id string) error {
	switch {
	case id == "":
		return invalid(field, "must not be empty")
	case len(id) > MaxIDLength:
		return invalid(field, "is longer than %d bytes", MaxIDLength)
	case !utf8.ValidString(id):
		return invalid(field, "is not valid UTF-8")
	}
	for _, r := range id {
		if r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return invalid(field, "%q must not contain '/', spaces or control characters", id)
		}
	}
	return nil
}

// validateIDs checks a list of ids, naming the bad one by index.
func validateIDs(field string, ids []string) error {
	for i, id := range ids {
		// The indexed field name is built only for a bad id: batch reads
		// check up to 100 ids per request.
		if ValidateID(field, id) != nil {
			return ValidateID(fmt.Sprintf("%s[%d]", field, i), id)
		}
	}
	return nil
}

// uniqueIDs refuses a list that names an id twice, naming the repeat.
func uniqueIDs(field string, ids []string) error {
	first := make(map[string]int, len(ids))
	for i, id := range ids {
		if j, ok := first[id]; ok {
			return invalid(fmt.Sprintf("%s[%d]", field, i), "%q is named twice in this request (first at %s[%d])", id, field, j)
		}
		first[id] = i
	}
	return nil
}

// checkMetadataSize refuses metadata (compact JSON) beyond MaxMetadataBytes.
func checkMetadataSize(m []byte) error {
	if len(m) > MaxMetadataBytes {
		return invalid("metadata", "is %d bytes as compact JSON; at most %d bytes are stored", len(m), MaxMetadataBytes)
	}
	return nil
}

// dedupe returns ids without repeats, in first-occurrence order.
func dedupe(ids []string) []string {
	seen := make(map[string]struct{}, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if _, ok := seen[id]; ok {
			continue
		}
		seen[id] = struct{}{}
		out = append(out, id)
	}
	return out
}

// batchIDs validates and dedupes the ids of a batch read.
func batchIDs(field string, ids []string) ([]string, error) {
	if len(ids) > MaxBatchIDs {
		return nil, invalid(field, "at most %d ids per request, got %d", MaxBatchIDs, len(ids))
	}
	if err := validateIDs(field, ids); err != nil {
		return nil, err
	}
	return dedupe(ids), nil
}

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
	if err := ValidateID("card_id", c.CardID); err != nil {
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
		return n, invalid("tool_calls", "must be an array or null")
	}
	if c.TTLSeconds < 0 || c.TTLSeconds > MaxTTLSeconds {
		return n, invalid("ttl_seconds", "must be between 1 and %d (0 or absent: never expires)", MaxTTLSeconds)
	}
	n.ttl = int32(c.TTLSeconds)
	if len(c.ToolCallID) > MaxIDLength {
		return n, invalid("tool_call_id", "is longer than %d bytes", MaxIDLength)
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
		return nil, invalid(field, "is not valid JSON: %v", err)
	}
	return buf.Bytes(), nil
}

// normalizeMetadata checks type, role and author_id, fills in the role of
// a standard type when absent, and returns the object with sorted keys.
func normalizeMetadata(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, invalid("metadata", "is required: an object with type and role")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, invalid("metadata", "must be a JSON object with type and role")
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
			return nil, invalid("metadata.role", "is required for custom type %q: one of system, user, assistant, tool", typ)
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
	return out, checkMetadataSize(out)
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
		return "", invalid("metadata."+key, "must be a string")
	}
	return s, nil
}
