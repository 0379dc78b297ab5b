// Package appendjson appends JSON values to byte slices without reflection,
// and measures JSON strings before they are written. It is the one JSON
// string escaper of both surfaces: CardBox renders cards and batch answers
// with it (the read hot path, whose JSON members come from Postgres jsonb,
// which is valid JSON and needs no re-checking), the CXDB protocol its
// ERROR frames, and the CXDB service sizes its answers with StringLen.
//
// What it appends is what encoding/json.Marshal appends for the same
// value (a string, or a json.RawMessage): compact, with <, >, &, U+2028
// and U+2029 escaped. A card's JSON is then the same bytes whether a
// route writes it as it is or through encoding/json (which compacts and
// escapes what a json.Marshaler returns).
package appendjson

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// String appends s as a JSON string, as encoding/json does: invalid UTF-8
// becomes U+FFFD; <, >, &, U+2028 and U+2029 are escaped.
func String(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf && !stringEscapes[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			invalid := r == utf8.RuneError && size == 1 // a U+FFFD in s is kept
			if !invalid && r != '\u2028' && r != '\u2029' {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			if invalid {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, `\u202`...)
				b = append(b, hex[r&0xf])
			}
			i += size
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// StringLen is the length of what String appends for s, quotes included:
// the room a JSON answer needs for s, known before it is written.
func StringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case !stringEscapes[c]:
				n++
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n += 2
			default:
				n += 6 // \u00XX
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			n += 6 // \ufffd, \u2028, \u2029
		} else {
			n += size
		}
		i += size
	}
	return n
}

// OptString appends s, or null when it is empty.
func OptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return String(b, s)
}

// Strings appends a JSON array of strings.
func Strings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = String(b, s)
	}
	return append(b, ']')
}

// stringEscapes are the ASCII bytes String escapes.
var stringEscapes = func() (t [utf8.RuneSelf]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = true
	}
	return t
}()

// Raw appends raw, which must be valid JSON, or null when it is empty.
func Raw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// Compact appends raw, which must be valid JSON, as encoding/json.Marshal
// appends a json.RawMessage: without the whitespace between tokens (jsonb
// writes "{"a": 1, "b": 2}"), with <, >, &, U+2028 and U+2029 in strings
// escaped; or null when raw is empty. Everything else is kept as it is:
// the order of the members, the spelling of numbers and of escapes.
func Compact(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	start, n := 0, len(raw)
	for i := 0; i < n; {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			b = append(b, raw[start:i]...)
			i++
			start = i
			continue
		case '"':
		default:
			i++
			continue
		}
		// A string: on to its closing quote.
		for i++; i < n; {
			c := raw[i]
			if !compactEscapes[c] {
				i++
				continue
			}
			if c == '"' {
				break
			}
			switch c {
			case '\\':
				i += 2 // the escaped byte, '"' or '\\' included
				continue
			case '<', '>', '&':
				b = append(b, raw[start:i]...)
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
				i++
				start = i
				continue
			}
			// 0xe2: U+2028 and U+2029 are e2 80 a8 and e2 80 a9.
			if i+2 < n && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xa8 {
				b = append(b, raw[start:i]...)
				b = append(b, '\\', 'u', '2', '0', '2', hex[raw[i+2]&0xf])
				i += 3
				start = i
				continue
			}
			i++
		}
		i++ // the closing quote
	}
	return append(b, raw[start:]...)
}

// compactEscapes are the bytes of a string Compact must look at.
var compactEscapes = [256]bool{'"': true, '\\': true, '<': true, '>': true, '&': true, 0xe2: true}

// RawList appends a JSON array of the given values, each valid JSON.
func RawList(b []byte, items []json.RawMessage) []byte {
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

// RawListLen is the length RawList appends for items.
func RawListLen(items []json.RawMessage) int {
	n := 2 + max(0, len(items)-1)
	for _, it := range items {
		n += len(it)
	}
	return n
}

// Time appends t as an RFC 3339 UTC time with as many fractional digits as
// it needs, or null when t is nil.
func Time(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
