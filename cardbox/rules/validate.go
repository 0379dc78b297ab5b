// Package rules holds the CardBox rules that need no storage: the
// limits of the API, what a valid id, card type, role and metadata are,
// the errors that say what is wrong with a request, and the content hash
// of a card. package cardbox applies them to what it stores.
package rules

import (
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
		return Invalid("metadata.type", "is required (a standard type such as \"task.instruction\", or a namespaced custom type such as \"myapp.note\")")
	}
	if _, ok := StandardTypes[t]; ok {
		return nil
	}
	if len(t) > MaxTypeLength || !namespacedType.MatchString(t) {
		return Invalid("metadata.type", "%q is not a standard type; custom types must be namespaced with a dot (e.g. \"myapp.%s\"), using letters, digits, '_' and '-', at most %d bytes",
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
	return Invalid("metadata.role", "%q is not a role; use one of system, user, assistant, tool", r)
}

// ValidateID checks a card, box or project id: 1 to MaxIDLength bytes of
// UTF-8 without control characters, spaces or '/'.
func ValidateID(field, id string) error {
	switch {
	case id == "":
		return Invalid(field, "must not be empty")
	case len(id) > MaxIDLength:
		return Invalid(field, "is longer than %d bytes", MaxIDLength)
	case !utf8.ValidString(id):
		return Invalid(field, "is not valid UTF-8")
	}
	for _, r := range id {
		if r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return Invalid(field, "%q must not contain '/', spaces or control characters", id)
		}
	}
	return nil
}

// ValidateIDs checks a list of ids, naming the bad one by index.
func ValidateIDs(field string, ids []string) error {
	for i, id := range ids {
		// The indexed field name is built only for a bad id: batch reads
		// check up to 100 ids per request.
		if ValidateID(field, id) != nil {
			return ValidateID(fmt.Sprintf("%s[%d]", field, i), id)
		}
	}
	return nil
}

// UniqueIDs refuses a list that names an id twice, naming the repeat.
func UniqueIDs(field string, ids []string) error {
	first := make(map[string]int, len(ids))
	for i, id := range ids {
		if j, ok := first[id]; ok {
			return Invalid(fmt.Sprintf("%s[%d]", field, i), "%q is named twice in this request (first at %s[%d])", id, field, j)
		}
		first[id] = i
	}
	return nil
}

// CheckMetadataSize refuses metadata (compact JSON) beyond MaxMetadataBytes.
func CheckMetadataSize(m []byte) error {
	if len(m) > MaxMetadataBytes {
		return Invalid("metadata", "is %d bytes as compact JSON; at most %d bytes are stored", len(m), MaxMetadataBytes)
	}
	return nil
}

// Dedupe returns ids without repeats, in first-occurrence order.
func Dedupe(ids []string) []string {
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

// BatchIDs validates and dedupes the ids of a batch read.
func BatchIDs(field string, ids []string) ([]string, error) {
	if len(ids) > MaxBatchIDs {
		return nil, Invalid(field, "at most %d ids per request, got %d", MaxBatchIDs, len(ids))
	}
	if err := ValidateIDs(field, ids); err != nil {
		return nil, err
	}
	return Dedupe(ids), nil
}
