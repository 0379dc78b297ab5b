package cardbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cardboxhq/cardbox/sqlc/db"
)

// Card reads come in two forms with one logic: the Card reads (GetCard,
// GetCards, BoxCards, GetBoxes) return Card values read from Postgres, and
// the JSON reads (GetCardJSON, GetCardsJSON, BoxCardsJSON, GetBoxesJSON)
// return each card's JSON (Card.AppendJSON), which the HTTP API writes as
// it is. The JSON reads serve cards from the Service's card cache: every
// read asks Postgres which of the cards are live, so deletes and expiry are
// seen at once, but only the cards missing from the cache are read in full
// and rendered.

// CardsOf answers a batch card read. C is Card, or json.RawMessage for the
// JSON reads.
type CardsOf[C any] struct {
	// Cards are the live cards, in request order without repeats.
	Cards []C
	// MissingIDs are the requested ids that are absent, deleted, expired
	// or another project's, in request order without repeats.
	MissingIDs []string
}

// CardsResult answers GetCards.
type CardsResult = CardsOf[Card]

// CardsJSON answers GetCardsJSON. Its cards' bytes are shared with the
// card cache: do not modify them.
type CardsJSON = CardsOf[json.RawMessage]

// cardReader reads the live cards among distinct ids, by id.
type cardReader[C any] func(ctx context.Context, project string, ids []string) (map[string]C, error)

// GetCard returns a live card; an absent, deleted or expired card is
// ErrNotFound.
func (s *Service) GetCard(ctx context.Context, project, cardID string) (Card, error) {
	return getCard(ctx, project, cardID, s.liveCards)
}

// GetCardJSON is GetCard returning the card's JSON. The bytes are shared
// with the card cache: do not modify them.
func (s *Service) GetCardJSON(ctx context.Context, project, cardID string) (json.RawMessage, error) {
	return getCard(ctx, project, cardID, s.liveJSON)
}

// GetCards reads up to MaxBatchIDs cards in one query. Ids are deduplicated
// keeping the first occurrence; results follow request order.
func (s *Service) GetCards(ctx context.Context, project string, cardIDs []string) (CardsResult, error) {
	return getCards(ctx, project, cardIDs, s.liveCards)
}

// GetCardsJSON is GetCards returning each card's JSON.
func (s *Service) GetCardsJSON(ctx context.Context, project string, cardIDs []string) (CardsJSON, error) {
	return getCards(ctx, project, cardIDs, s.liveJSON)
}

func getCard[C any](ctx context.Context, project, cardID string, read cardReader[C]) (C, error) {
	var none C
	if err := checkProject(project); err != nil {
		return none, err
	}
	if err := ValidateID("card_id", cardID); err != nil {
		return none, err
	}
	byID, err := read(ctx, project, []string{cardID})
	if err != nil {
		return none, err
	}
	c, ok := byID[cardID]
	if !ok {
		return none, notFound("card", cardID)
	}
	return c, nil
}

func getCards[C any](ctx context.Context, project string, cardIDs []string, read cardReader[C]) (CardsOf[C], error) {
	if err := checkProject(project); err != nil {
		return CardsOf[C]{}, err
	}
	ids, err := batchIDs("card_ids", cardIDs)
	if err != nil {
		return CardsOf[C]{}, err
	}
	byID, err := read(ctx, project, ids)
	if err != nil {
		return CardsOf[C]{}, err
	}
	res := CardsOf[C]{Cards: make([]C, 0, len(byID)), MissingIDs: []string{}}
	for _, id := range ids {
		if c, ok := byID[id]; ok {
			res.Cards = append(res.Cards, c)
		} else {
			res.MissingIDs = append(res.MissingIDs, id)
		}
	}
	return res, nil
}

// liveCards reads the live cards among distinct ids (one query), by id.
func (s *Service) liveCards(ctx context.Context, project string, ids []string) (map[string]Card, error) {
	byID := make(map[string]Card, len(ids))
	if len(ids) == 0 {
		return byID, nil
	}
	rows, err := s.as(project).GetLiveCards(ctx, db.GetLiveCardsParams{TenantID: project, CardIds: ids, Now: s.now()})
	if err != nil {
		return nil, fmt.Errorf("get cards: %w", err)
	}
	for i := range rows {
		byID[rows[i].CardID] = cardFromRow(rows[i])
	}
	return byID, nil
}

// liveJSON returns the JSON of the live cards among distinct ids, by id.
// With the cache on, a first query returns the live ids and their versions
// (from an index alone), and a second reads the full rows of the cards
// the cache lacks, only when it lacks some.
func (s *Service) liveJSON(ctx context.Context, project string, ids []string) (map[string]json.RawMessage, error) {
	byID := make(map[string]json.RawMessage, len(ids))
	if len(ids) == 0 {
		return byID, nil
	}
	now := s.now()
	if s.cache == nil {
		if err := s.renderLive(ctx, project, ids, now, byID); err != nil {
			return nil, err
		}
		return byID, nil
	}
	live, err := s.as(project).LiveCardVersions(ctx, db.LiveCardVersionsParams{TenantID: project, CardIds: ids, Now: now})
	if err != nil {
		return nil, fmt.Errorf("get cards: %w", err)
	}
	if len(live.Positions) != len(live.Versions) {
		return nil, fmt.Errorf("get cards: %d positions for %d versions", len(live.Positions), len(live.Versions))
	}
	var misses []string
	for i, pos := range live.Positions {
		if pos < 1 || int(pos) > len(ids) {
			return nil, fmt.Errorf("get cards: position %d out of 1..%d", pos, len(ids))
		}
		id := ids[pos-1]
		if b := s.cache.Get(cacheKey{project, id}, live.Versions[i].UnixMicro()); b != nil {
			byID[id] = b
		} else {
			misses = append(misses, id)
		}
	}
	if len(misses) > 0 {
		// A card deleted since the first query is not read: it is missing,
		// as it would have been a moment later.
		if err := s.renderLive(ctx, project, misses, now, byID); err != nil {
			return nil, err
		}
	}
	if len(byID) < len(ids) {
		s.forgetDead(project, ids, byID)
	}
	return byID, nil
}

// renderLive reads the live cards among ids in full (one query), renders
// them into byID and caches them.
func (s *Service) renderLive(ctx context.Context, project string, ids []string, now time.Time, byID map[string]json.RawMessage) error {
	rows, err := s.as(project).GetLiveCards(ctx, db.GetLiveCardsParams{TenantID: project, CardIds: ids, Now: now})
	if err != nil {
		return fmt.Errorf("get cards: %w", err)
	}
	for i := range rows {
		c := cardFromRow(rows[i])
		b := c.AppendJSON(make([]byte, 0, c.jsonSize()))
		if s.cache != nil { // else the key's clones would be wasted
			s.cacheCard(project, c.CardID, c.CreatedAt.UnixMicro(), b)
		}
		byID[c.CardID] = b
	}
	return nil
}

// cacheKey names a card in the card cache; the project makes every entry
// one tenant's.
type cacheKey struct{ project, card string }

// cacheCard caches the JSON b of a card at version (its created_at in Unix
// microseconds). The cache keeps its key, so it gets its own copies of the
// strings: project and card may share memory with a request or a row that
// should not stay alive with the entry.
func (s *Service) cacheCard(project, card string, version int64, b []byte) {
	k := cacheKey{strings.Clone(project), strings.Clone(card)}
	s.cache.Put(k, version, b, len(k.project)+len(k.card))
}

// forgetDead drops from the cache the ids that are not live, so that
// deleted and expired cards give their memory back at once.
func (s *Service) forgetDead(project string, ids []string, live map[string]json.RawMessage) {
	for _, id := range ids {
		if _, ok := live[id]; !ok {
			s.cache.Drop(cacheKey{project, id})
		}
	}
}
