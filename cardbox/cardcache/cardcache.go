// Package cardcache holds what CardBox keeps in memory of immutable
// cards: their rendered JSON, the facts assembly needs of them, and their
// rendering as chat messages, each bounded in bytes.
//
// A card never changes while it lives, and an id can name a new card only
// after the old one was purged, with a later created_at; so every entry is
// versioned by the card's created_at (Unix microseconds) and a lookup for
// another version misses. Liveness is the caller's to vouch for: an entry
// of the rendered JSON or facts carries the card's expiry and a stamp,
// the project's change counter when a read last saw the card live (see
// package cardbox), and is served only at that stamp and before that
// expiry.
package cardcache

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"time"

	"github.com/cardboxhq/cardbox/internal/bytecache"
)

// Key names a card; the project makes every entry one tenant's.
type Key struct{ Project, Card string }

// Cache is the three caches of a Service. A nil *Cache holds nothing.
type Cache struct {
	cards, facts, messages *bytecache.Cache[Key]
}

// sideShare is the part of the card cache's budget that the facts cache
// and the message cache each get beside it: a facts entry is about 200
// bytes and a message about the card's content, against a card's 300 or
// more.
const sideShare = 4

// New returns a cache of rendered cards of at most cardBytes, with the
// facts and message caches beside it; nil (no cache) when cardBytes is
// not positive.
func New(cardBytes int64) *Cache {
	if cardBytes <= 0 {
		return nil
	}
	return &Cache{cards: bytecache.New[Key](cardBytes), facts: bytecache.New[Key](cardBytes / sideShare),
		messages: bytecache.New[Key](cardBytes / sideShare)}
}

// A card entry's value is the card's expiry (Unix microseconds, big
// endian; 0 for none) followed by its JSON, so that a read can tell an
// expired card without Postgres.
const expiryBytes = 8

// Card is a card entry as found.
type Card struct {
	ID      string
	Version int64 // created_at, Unix microseconds
	Expires int64 // Unix microseconds, 0 for none
	JSON    json.RawMessage
}

// Lookup serves into byID the cached cards among ids that are current at
// stamp and not expired at now; it returns the cached cards the caller
// must check again (stamped before the project's last change) and the
// ids to read in full.
func (c *Cache) Lookup(project string, ids []string, now time.Time, stamp uint64, byID map[string]json.RawMessage) (unchecked []Card, misses []string) {
	for _, id := range ids {
		v, version, st := c.cards.Peek(Key{project, id})
		expires, js, ok := unpackCard(v)
		switch {
		case !ok || (expires != 0 && expires <= now.UnixMicro()):
			misses = append(misses, id)
		case st == stamp:
			byID[id] = js
		default:
			unchecked = append(unchecked, Card{id, version, expires, js})
		}
	}
	return unchecked, misses
}

// Confirm stamps a card entry the caller found live at version since.
func (c *Cache) Confirm(project, card string, version int64, stamp uint64) {
	c.cards.SetStamp(Key{project, card}, version, stamp)
}

// PutCard caches a card at version, stamped, rendering it with render
// (which appends the JSON, about size bytes, to its argument), and
// returns the JSON as cached.
func (c *Cache) PutCard(project, card string, version int64, stamp uint64, expires *time.Time, size int, render func([]byte) []byte) json.RawMessage {
	v := make([]byte, expiryBytes, expiryBytes+size)
	if expires != nil {
		binary.BigEndian.PutUint64(v, uint64(expires.UnixMicro()))
	}
	v = render(v)
	put(c.cards, project, card, version, stamp, v)
	return v[expiryBytes:]
}

// put stores v under a key of its own copies of the strings: project and
// card may share memory with a request or a row that should not stay
// alive with the entry.
func put(to *bytecache.Cache[Key], project, card string, version int64, stamp uint64, v []byte) {
	k := Key{strings.Clone(project), strings.Clone(card)}
	to.Put(k, version, v, len(k.Project)+len(k.Card))
	to.SetStamp(k, version, stamp)
}

func unpackCard(v []byte) (expires int64, js json.RawMessage, ok bool) {
	if len(v) < expiryBytes {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(v)), v[expiryBytes:], true
}

// Drop forgets a card (deleted, or expired).
func (c *Cache) Drop(project, card string) {
	c.cards.Drop(Key{project, card})
}

// ForgetDead drops the ids that are not live, so that deleted and
// expired cards give their memory back at once.
func (c *Cache) ForgetDead(project string, ids []string, live map[string]json.RawMessage) {
	for _, id := range ids {
		if _, ok := live[id]; !ok {
			c.cards.Drop(Key{project, id})
		}
	}
}

// DropProject forgets every card of a deleted project; it returns how
// many entries it dropped.
func (c *Cache) DropProject(project string) int {
	if c == nil {
		return 0
	}
	n := 0
	for _, b := range []*bytecache.Cache[Key]{c.cards, c.facts, c.messages} {
		n += b.DropIf(func(k Key) bool { return k.Project == project })
	}
	return n
}

// CardStats returns the number of card entries and their bytes.
func (c *Cache) CardStats() (entries int, bytes int64) {
	if c == nil {
		return 0, 0
	}
	return c.cards.Stats()
}

// Message returns the chat message rendered from the card at version, or
// nil. A message is a function of the card's JSON alone, so it needs no
// stamp: the caller has vouched for the card's liveness.
func (c *Cache) Message(project, card string, version int64) []byte {
	if c == nil {
		return nil
	}
	return c.messages.Get(Key{project, card}, version)
}

// PutMessage caches the chat message rendered from the card at version.
func (c *Cache) PutMessage(project, card string, version int64, message []byte) {
	if c == nil {
		return
	}
	put(c.messages, project, card, version, 0, message)
}
