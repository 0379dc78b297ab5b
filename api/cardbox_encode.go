package api

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/cardbox"
)

// Cards are rendered by hand rather than by encoding/json: card reads are
// the hot path, and a card's JSON members (content, metadata, tool_calls)
// come from Postgres jsonb, which is valid JSON and needs no re-checking.
//
// A card renders as
//
//	{"card_id", "project_id", "type", "content", "created_at", "author_id",
//	 "metadata", "tool_calls", "tool_call_id", "ttl_seconds", "role",
//	 "expires_at"[, "deleted_at"]}
//
// The first ten members are the public CardBox service's shape; absent
// values are null. deleted_at appears only when a write replays a deleted
// card.

// cardsJSON renders a list of cards.
type cardsJSON []cardbox.Card

// MarshalJSON implements json.Marshaler.
func (cs cardsJSON) MarshalJSON() ([]byte, error) {
	return appendCards(nil, cs), nil
}

// appendCards appends a JSON array of cards.
func appendCards(b []byte, cards []cardbox.Card) []byte {
	b = append(b, '[')
	for i, c := range cards {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCard(b, c)
	}
	return append(b, ']')
}

// appendCard appends one card.
func appendCard(b []byte, c cardbox.Card) []byte {
	b = append(b, `{"card_id":`...)
	b = appendString(b, c.CardID)
	b = append(b, `,"project_id":`...)
	b = appendString(b, c.ProjectID)
	b = append(b, `,"type":`...)
	b = appendString(b, c.Type)
	b = append(b, `,"content":`...)
	b = appendRaw(b, c.Content)
	b = append(b, `,"created_at":`...)
	b = appendTime(b, &c.CreatedAt)
	b = append(b, `,"author_id":`...)
	b = appendOptString(b, c.AuthorID)
	b = append(b, `,"metadata":`...)
	b = appendRaw(b, c.Metadata)
	b = append(b, `,"tool_calls":`...)
	b = appendRaw(b, c.ToolCalls)
	b = append(b, `,"tool_call_id":`...)
	b = appendOptString(b, c.ToolCallID)
	b = append(b, `,"ttl_seconds":`...)
	if c.TTLSeconds > 0 {
		b = strconv.AppendInt(b, int64(c.TTLSeconds), 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"role":`...)
	b = appendString(b, c.Role)
	b = append(b, `,"expires_at":`...)
	b = appendTime(b, c.ExpiresAt)
	if c.DeletedAt != nil {
		b = append(b, `,"deleted_at":`...)
		b = appendTime(b, c.DeletedAt)
	}
	return append(b, '}')
}

// appendRaw appends stored JSON, or null.
func appendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// appendTime appends an RFC 3339 UTC time, or null.
func appendTime(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendOptString appends s, or null when it is empty.
func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
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

// appendStrings appends a JSON array of strings.
func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// sendJSON writes a pre-encoded JSON body.
func sendJSON(c echo.Context, status int, body []byte) error {
	return c.Blob(status, echo.MIMEApplicationJSON, body)
}

// cardsBatchBody renders {"cards": [...], "missing_ids": [...]}.
func cardsBatchBody(res cardbox.CardsResult) []byte {
	b := make([]byte, 0, 64+len(res.Cards)*512)
	b = append(b, `{"cards":`...)
	b = appendCards(b, res.Cards)
	b = append(b, `,"missing_ids":`...)
	b = appendStrings(b, res.MissingIDs)
	return append(b, '}')
}
