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

// Facts returns the facts of card if the cache vouches for them: an entry
// stamped stamp, not expired at now; with the card's version.
func (c *Cache) Facts(project, card string, stamp uint64, now time.Time) (f Facts, version int64, ok bool) {
	if c == nil {
		return Facts{}, 0, false
	}
	v, version, st := c.facts.Peek(Key{project, card})
	if v == nil || st != stamp {
		return Facts{}, 0, false
	}
	f, expires, ok := unpackFacts(v)
	if !ok || (expires != 0 && expires <= now.UnixMicro()) {
		return Facts{}, 0, false
	}
	return f, version, true
}

// PutFacts caches the facts of a live card at version, stamped.
func (c *Cache) PutFacts(project, card string, version int64, stamp uint64, f *Facts, expires int64) {
	if c == nil {
		return
	}
	put(c.facts, project, card, version, stamp, packFacts(f, expires))
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

// unpackFacts decodes a facts value; ok is false for one it cannot read.
func unpackFacts(v []byte) (f Facts, expires int64, ok bool) {
	if len(v) < factsHeader {
		return f, 0, false
	}
	expires = int64(binary.BigEndian.Uint64(v))
	f.Zone = layout.Zone(v[expiryBytes])
	f.Tokens = make([]int32, v[expiryBytes+1])
	rest := v[factsHeader:]
	if len(rest) < 4*len(f.Tokens) {
		return f, 0, false
	}
	for i := range f.Tokens {
		f.Tokens[i] = int32(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
	}
	if f.ToolCallID, rest, ok = readString(rest); !ok {
		return f, 0, false
	}
	n, w := binary.Uvarint(rest)
	if w <= 0 || n > uint64(len(rest)) {
		return f, 0, false
	}
	rest = rest[w:]
	if n > 0 {
		f.ToolCallIDs = make([]string, n)
	}
	for i := range f.ToolCallIDs {
		if f.ToolCallIDs[i], rest, ok = readString(rest); !ok {
			return f, 0, false
		}
	}
	return f, expires, true
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
