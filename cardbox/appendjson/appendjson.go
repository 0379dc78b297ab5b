// Package appendjson appends JSON values to byte slices without reflection.
// CardBox renders cards and batch answers with it: they are the read hot
// path, and their JSON members come from Postgres jsonb, which is valid JSON
// and needs no re-checking.
package appendjson

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// String appends s as a JSON string. Invalid UTF-8 becomes U+FFFD and
// U+2028/U+2029 are escaped, as encoding/json does; <, > and & are not.
func String(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError && r != '\u2028' && r != '\u2029' {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			if r == utf8.RuneError {
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
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
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

// Raw appends raw, which must be valid JSON, or null when it is empty.
func Raw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

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
