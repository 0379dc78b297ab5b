package answer

import (
	"strings"

	"github.com/cardboxhq/cardbox/cardbox/rules"
)

// JSONStringBound is at least the length of s as a JSON string: every
// byte escaped at most to six, and the quotes.
func JSONStringBound(s string) int { return 6*len(s) + 2 }

// IDsJSONSize is at least the bytes of ids in a JSON list, each quoted,
// escaped as encoding/json escapes it and followed by a separator; false
// when an id is longer than any valid one.
func IDsJSONSize(ids []string) (int64, bool) {
	var n int64
	for _, id := range ids {
		if len(id) > rules.MaxIDLength {
			return 0, false
		}
		n += RawJSONSize(id) + 3
		n += int64(strings.Count(id, `"`) + strings.Count(id, `\`))
	}
	return n, true
}

// CompactJSONSize is at least the bytes of the JSON text b as
// encoding/json writes it (RawJSONSize), without the whitespace between
// its tokens.
func CompactJSONSize(b []byte) int64 {
	var space int64
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			space++
		}
	}
	return RawJSONSize(string(b)) - space
}

// RawJSONSize is at least the bytes of the JSON text s as encoding/json
// writes it: compact, with <, >, & and the line and paragraph separators
// escaped.
func RawJSONSize(s string) int64 {
	return int64(len(s) + 5*strings.Count(s, "<") + 5*strings.Count(s, ">") + 5*strings.Count(s, "&") +
		3*strings.Count(s, "\u2028") + 3*strings.Count(s, "\u2029"))
}
