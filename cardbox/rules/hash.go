package rules

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/zeebo/blake3"
)

// ContentHash is the BLAKE3 hash of content as canonical JSON: object
// members sorted by key (bytewise; a key given twice keeps its last
// value), no insignificant whitespace, strings as encoding/json writes
// them without HTML escaping, numbers as written. JSON null (nil) hashes
// as "null".
func ContentHash(content []byte) ([]byte, error) {
	var buf bytes.Buffer
	if len(bytes.TrimSpace(content)) == 0 {
		buf.WriteString("null")
	} else if err := canonical(&buf, content); err != nil {
		return nil, err
	}
	sum := blake3.Sum256(buf.Bytes())
	return sum[:], nil
}

// canonical writes raw as canonical JSON.
func canonical(buf *bytes.Buffer, raw []byte) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("canonical JSON: %w", err)
	}
	return writeCanonical(buf, v)
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case string:
		writeString(buf, x)
	case json.Number:
		buf.WriteString(x.String())
	case bool:
		fmt.Fprint(buf, x)
	case nil:
		buf.WriteString("null")
	default:
		return fmt.Errorf("canonical JSON: unexpected %T", v)
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) {
	e := json.NewEncoder(buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(s)             // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode's newline
}

// CardText is the text of a card that its token count counts: its
// content (a JSON string as its text, any other value as its JSON) and
// its tool calls' JSON.
func CardText(content, toolCalls []byte) string {
	var b strings.Builder
	var s string
	if len(content) > 0 && content[0] == '"' && json.Unmarshal(content, &s) == nil {
		b.WriteString(s)
	} else if len(content) > 0 && string(content) != "null" {
		b.Write(content)
	}
	if len(toolCalls) > 0 && string(toolCalls) != "null" {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.Write(toolCalls)
	}
	return b.String()
}

// ParseContentHash reads a content hash as written in hex.
func ParseContentHash(s string) ([]byte, error) {
	h, err := hex.DecodeString(s)
	if err != nil || len(h) != 32 {
		return nil, Invalid("content_hash", "must be 64 hex digits (a BLAKE3 hash), got %q", s)
	}
	return h, nil
}
