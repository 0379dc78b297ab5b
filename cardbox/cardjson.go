package cardbox

import (
	"strconv"

	"github.com/cardboxhq/cardbox/internal/appendjson"
)

// AppendJSON appends the card's JSON form, the one every CardBox answer
// uses:
//
//	{"card_id", "project_id", "type", "content", "created_at", "author_id",
//	 "metadata", "tool_calls", "tool_call_id", "ttl_seconds", "role",
//	 "expires_at"[, "deleted_at"]}
//
// The first ten members are the public CardBox service's shape; absent
// values are null. deleted_at appears only on a card a write returns for a
// replay of a deleted card.
//
// It is the one spelling of a card on every route: the card as stored,
// as encoding/json.Marshal would write it. content, metadata and
// tool_calls are Postgres jsonb, whose members are in jsonb's order (by
// length, then bytes; a repeated key keeps its last value) and whose
// numbers keep their spelling (1.0 stays 1.0, 1e3 is 1000); jsonb's text
// adds a space after each colon and comma, which appendjson.Compact
// drops. Rendering happens once per card and cache entry, not per read.
func (c *Card) AppendJSON(b []byte) []byte {
	b = append(b, `{"card_id":`...)
	b = appendjson.String(b, c.CardID)
	b = append(b, `,"project_id":`...)
	b = appendjson.String(b, c.ProjectID)
	b = append(b, `,"type":`...)
	b = appendjson.String(b, c.Type)
	b = append(b, `,"content":`...)
	b = appendjson.Compact(b, c.Content)
	b = append(b, `,"created_at":`...)
	b = appendjson.Time(b, &c.CreatedAt)
	b = append(b, `,"author_id":`...)
	b = appendjson.OptString(b, c.AuthorID)
	b = append(b, `,"metadata":`...)
	b = appendjson.Compact(b, c.Metadata)
	b = append(b, `,"tool_calls":`...)
	b = appendjson.Compact(b, c.ToolCalls)
	b = append(b, `,"tool_call_id":`...)
	b = appendjson.OptString(b, c.ToolCallID)
	b = append(b, `,"ttl_seconds":`...)
	if c.TTLSeconds > 0 {
		b = strconv.AppendInt(b, int64(c.TTLSeconds), 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"role":`...)
	b = appendjson.String(b, c.Role)
	b = append(b, `,"expires_at":`...)
	b = appendjson.Time(b, c.ExpiresAt)
	if c.DeletedAt != nil {
		b = append(b, `,"deleted_at":`...)
		b = appendjson.Time(b, c.DeletedAt)
	}
	return append(b, '}')
}

// jsonSize is a capacity for the card's JSON that is rarely exceeded: the
// stored members plus the names, ids and times.
func (c *Card) jsonSize() int {
	return 352 + len(c.Content) + len(c.Metadata) + len(c.ToolCalls) +
		2*(len(c.CardID)+len(c.ProjectID)+len(c.Type)+len(c.AuthorID)+len(c.ToolCallID))
}
