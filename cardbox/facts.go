package cardbox

import (
	"encoding/binary"
	"strings"
	"time"

	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/tokens"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// Assembly reads what it needs of a box's cards (their default zone, tool
// call ids and token counts) from the facts cache, beside the card cache
// and trusted the same way (see liveJSON): an entry stamped with the
// project's current change counter, not expired, is a live card whose
// facts are current, since cards are immutable. Only the cards the cache
// cannot vouch for are asked of Postgres (AssemblyCards), which also says
// why a card is not live.

// cardFacts is what assembly needs of a live card.
type cardFacts struct {
	zone layout.Zone // the card's default zone (DefaultZone of its type)
	// tokens are the card's counts, in tokens.Names order; -1 when not
	// stored.
	tokens      []int32
	toolCallID  string
	toolCallIDs []string
}

// The facts cache has an entry per card that an assembly saw live; its
// value is the card's expiry (Unix microseconds, big endian, 0 for none),
// its zone (a byte), the number of its token counts (a byte) and the
// counts (4 bytes each, big endian), and its tool call ids (a uvarint
// length before each, the count of the calls it makes first).
const factsHeader = expiryBytes + 2

// factsCacheShare is the part of Options.CardCacheBytes the facts cache
// gets, beyond it: an entry is about 200 bytes against a card's 300 or more.
const factsCacheShare = 4

// tokenizerIndex returns the index of a known tokenizer in tokens.Names.
func tokenizerIndex(name string) int {
	for i, n := range tokens.Names {
		if n == name {
			return i
		}
	}
	return -1
}

// factsFromRow reads the facts of a card AssemblyCards found.
func factsFromRow(r db.AssemblyCardsRow) cardFacts {
	f := cardFacts{zone: layout.DefaultZone(r.Type), toolCallID: r.ToolCallID, toolCallIDs: r.ToolCallIds,
		tokens: make([]int32, len(tokens.Names))}
	for i := range f.tokens {
		f.tokens[i] = -1
		if i < len(r.Tokens) {
			f.tokens[i] = r.Tokens[i]
		}
	}
	return f
}

// packFacts encodes f as a facts cache value.
func packFacts(f *cardFacts, expires int64) []byte {
	n := factsHeader + 4*len(f.tokens) + binary.MaxVarintLen64*(2+len(f.toolCallIDs)) + len(f.toolCallID)
	for _, id := range f.toolCallIDs {
		n += len(id)
	}
	v := make([]byte, expiryBytes, n)
	binary.BigEndian.PutUint64(v, uint64(expires))
	v = append(v, byte(f.zone), byte(len(f.tokens)))
	for _, t := range f.tokens {
		v = binary.BigEndian.AppendUint32(v, uint32(t))
	}
	v = appendString(v, f.toolCallID)
	v = binary.AppendUvarint(v, uint64(len(f.toolCallIDs)))
	for _, id := range f.toolCallIDs {
		v = appendString(v, id)
	}
	return v
}

func appendString(v []byte, s string) []byte {
	return append(binary.AppendUvarint(v, uint64(len(s))), s...)
}

// unpackFacts decodes a facts cache value; ok is false for a miss (nil)
// or a value it cannot read.
func unpackFacts(v []byte) (f cardFacts, expires int64, ok bool) {
	if len(v) < factsHeader {
		return f, 0, false
	}
	expires = int64(binary.BigEndian.Uint64(v))
	f.zone = layout.Zone(v[expiryBytes])
	f.tokens = make([]int32, v[expiryBytes+1])
	rest := v[factsHeader:]
	if len(rest) < 4*len(f.tokens) {
		return f, 0, false
	}
	for i := range f.tokens {
		f.tokens[i] = int32(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
	}
	if f.toolCallID, rest, ok = readString(rest); !ok {
		return f, 0, false
	}
	n, w := binary.Uvarint(rest)
	if w <= 0 || n > uint64(len(rest)) {
		return f, 0, false
	}
	rest = rest[w:]
	if n > 0 {
		f.toolCallIDs = make([]string, n)
	}
	for i := range f.toolCallIDs {
		if f.toolCallIDs[i], rest, ok = readString(rest); !ok {
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

// cachedFacts returns the facts of card if the cache vouches for them: an
// entry stamped stamp, not expired at now.
func (s *Service) cachedFacts(project, card string, stamp uint64, now time.Time) (cardFacts, bool) {
	v, _, st := s.facts.Peek(cacheKey{project, card})
	if v == nil || st != stamp {
		return cardFacts{}, false
	}
	f, expires, ok := unpackFacts(v)
	if !ok || (expires != 0 && expires <= now.UnixMicro()) {
		return cardFacts{}, false
	}
	return f, true
}

// cacheFacts caches the facts of a live card at version (created_at, Unix
// microseconds), stamped; see cacheCard.
func (s *Service) cacheFacts(project, card string, version int64, stamp uint64, f *cardFacts, expires int64) {
	if s.facts == nil {
		return
	}
	k := cacheKey{strings.Clone(project), strings.Clone(card)}
	s.facts.Put(k, version, packFacts(f, expires), len(k.project)+len(k.card))
	s.facts.SetStamp(k, version, stamp)
}
