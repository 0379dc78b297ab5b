package cardcache

import (
	"encoding/binary"
	"time"

	"github.com/cardboxhq/cardbox/cardbox/layout"
)

// Facts are what assembly needs of a live card.
type Facts struct {
	Zone layout.Zone // the card's default zone (DefaultZone of its type)
	// Tokens are the card's counts, in tokens.Names order; -1 when not
	// stored.
	Tokens      []int32
	ToolCallID  string
	ToolCallIDs []string
}

// A facts entry's value is the card's expiry (as a card entry's), its
// zone (a byte), the number of its token counts (a byte) and the counts
// (4 bytes each, big endian), and its tool call ids (a uvarint length
// before each, the count of the calls it makes first).
const factsHeader = expiryBytes + 2

// PutFacts caches the facts of a live card at version, stamped.
func (c *Cache) PutFacts(project, card string, version int64, stamp uint64, f *Facts, expires int64) {
	if c == nil {
		return
	}
	put(c.facts, project, card, version, stamp, packFacts(f, expires))
}

// Fact is what assembly needs of a live card under one tokenizer.
type Fact struct {
	Zone layout.Zone
	// Tokens is the card's count; -1 when not stored.
	Tokens      int32
	ToolCallID  string
	ToolCallIDs []string
	// Version is the card's created_at, Unix microseconds.
	Version int64
	// Expires is when the card expires, Unix microseconds; 0 for never.
	Expires int64
}

// Fact is Facts under the tokenizer at index tokenizer (in tokens.Names
// order), read without copying the other counts.
func (c *Cache) Fact(project, card string, stamp uint64, now time.Time, tokenizer int) (Fact, bool) {
	if c == nil {
		return Fact{}, false
	}
	v, version, st := c.facts.Peek(Key{project, card})
	if v == nil || st != stamp || len(v) < factsHeader {
		return Fact{}, false
	}
	expires := int64(binary.BigEndian.Uint64(v))
	if expires != 0 && expires <= now.UnixMicro() {
		return Fact{}, false
	}
	f := Fact{Zone: layout.Zone(v[expiryBytes]), Tokens: -1, Version: version, Expires: expires}
	counts := int(v[expiryBytes+1])
	rest := v[factsHeader:]
	if len(rest) < 4*counts {
		return Fact{}, false
	}
	if tokenizer < counts {
		f.Tokens = int32(binary.BigEndian.Uint32(rest[4*tokenizer:]))
	}
	ids, ok := readToolCalls(rest[4*counts:])
	if !ok {
		return Fact{}, false
	}
	f.ToolCallID, f.ToolCallIDs = ids.answers, ids.makes
	return f, true
}

func packFacts(f *Facts, expires int64) []byte {
	n := factsHeader + 4*len(f.Tokens) + binary.MaxVarintLen64*(2+len(f.ToolCallIDs)) + len(f.ToolCallID)
	for _, id := range f.ToolCallIDs {
		n += len(id)
	}
	v := make([]byte, expiryBytes, n)
	binary.BigEndian.PutUint64(v, uint64(expires))
	v = append(v, byte(f.Zone), byte(len(f.Tokens)))
	for _, t := range f.Tokens {
		v = binary.BigEndian.AppendUint32(v, uint32(t))
	}
	v = appendString(v, f.ToolCallID)
	v = binary.AppendUvarint(v, uint64(len(f.ToolCallIDs)))
	for _, id := range f.ToolCallIDs {
		v = appendString(v, id)
	}
	return v
}

func appendString(v []byte, s string) []byte {
	return append(binary.AppendUvarint(v, uint64(len(s))), s...)
}

// toolCalls are the tool call ids of a facts value: the call the card
// answers and those it makes.
type toolCalls struct {
	answers string
	makes   []string
}

func readToolCalls(v []byte) (ids toolCalls, ok bool) {
	if ids.answers, v, ok = readString(v); !ok {
		return ids, false
	}
	n, w := binary.Uvarint(v)
	if w <= 0 || n > uint64(len(v)) {
		return ids, false
	}
	v = v[w:]
	if n > 0 {
		ids.makes = make([]string, n)
	}
	for i := range ids.makes {
		if ids.makes[i], v, ok = readString(v); !ok {
			return ids, false
		}
	}
	return ids, true
}

func readString(v []byte) (s string, rest []byte, ok bool) {
	n, w := binary.Uvarint(v)
	if w <= 0 || n > uint64(len(v)-w) {
		return "", nil, false
	}
	if n == 0 {
		return "", v[w:], true
	}
	return string(v[w : w+int(n)]), v[w+int(n):], true
}
