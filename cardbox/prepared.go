package cardbox

import (
	"math"

	"github.com/cardboxhq/cardbox/cardbox/assembly"
	"github.com/cardboxhq/cardbox/cardbox/internal/lru"
)

// An assembly of an unchanged box repeats most of its work: the box's
// entries (arrays of up to rules.MaxBoxCards elements that Postgres sends
// and pgx decodes), its cards' facts, its plain layout and the candidates
// made of them are the same as the last time. The prepared cache keeps
// the candidates with the box's version (which every change of the box's
// row moves to a value the box never had, migration 00049) and the
// project's card change counter (which every change of a card moves, see
// liveJSON), both read in one statement. While both are where they were,
// and no card has expired since, the candidates are what a fresh read
// would make, so an assembly asks Postgres for the two numbers only
// (AssemblyBoxVersion).
//
// A card that was missing cannot be vouched for this way (a new card does
// not move the counter), so candidates with a missing card are not kept.

// preparedKey names a box's candidates under one tokenizer (the index of
// its name in tokens.Names): the counts differ between tokenizers.
type preparedKey struct {
	project, box string
	tokenizer    int
}

// prepared is what an assembly made of a box's entries: read only once
// made, shared by the assemblies that find it.
type prepared struct {
	version int64  // the box's version
	stamp   uint64 // the card change counter, as a cache stamp (cardStamp)
	// expires is the earliest expiry of the live cards (Unix
	// microseconds); math.MaxInt64 when none expires.
	expires    int64
	candidates []assembly.Candidate
	cards      *assemblyCards
}

// fresh reports whether p is what a read at version and stamp, at now
// (Unix microseconds), would make.
func (p *prepared) fresh(version int64, stamp uint64, now int64) bool {
	return p.version == version && p.stamp == stamp && now < p.expires
}

// newPrepared returns the candidates and cards made at version and at
// (whose stamp the cache entry takes), or nil when they may not be kept:
// the project has no live row, or a card was missing.
func newPrepared(version int64, at factsAt, candidates []assembly.Candidate, cards *assemblyCards) *prepared {
	if !at.exists {
		return nil
	}
	p := &prepared{version: version, stamp: at.stamp, expires: math.MaxInt64, candidates: candidates, cards: cards}
	for _, c := range candidates {
		if c.Dead == assembly.LeftOutMissing {
			return nil
		}
	}
	for _, st := range cards.states {
		if st.dead == "" && st.fact.Expires != 0 {
			p.expires = min(p.expires, st.fact.Expires)
		}
	}
	return p
}

// preparedEntryBytes is about what one entry of a prepared box holds in
// memory (its candidate, its card's state and index), to bound the
// cache in bytes.
const preparedEntryBytes = 256

// preparedCache holds the prepared boxes most recently used, up to a
// number of entries in all.
type preparedCache = lru.Cache[preparedKey, *prepared]

// newPreparedCache returns a cache for about bytes of prepared boxes, or
// nil (which holds nothing) when bytes is not positive.
func newPreparedCache(bytes int64) *preparedCache {
	return lru.New[preparedKey](int(bytes/preparedEntryBytes), func(p *prepared) int { return len(p.candidates) })
}
