package cardbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/cardbox/cardcache"
	"github.com/cardboxhq/cardbox/cardbox/internal/cardboxdb"
)

// Card reads answer each card's JSON (Card.AppendJSON), which the HTTP API
// writes as it is, from the Service's card cache: every read asks
// Postgres which of the cards are live, so deletes and expiry are seen at
// once, but only the cards missing from the cache are read in full and
// rendered. The reads that answer clients are bounded (see bounded.go).

// CardsJSON answers a batch card read (GetCardsJSONWithin). Its cards'
// bytes are shared with the card cache: do not modify them.
type CardsJSON struct {
	// Cards are the live cards' JSON, in request order without repeats.
	Cards []json.RawMessage
	// MissingIDs are the requested ids that are absent, deleted, expired
	// or another project's, in request order without repeats.
	MissingIDs []string
}

// liveCards reads the live cards among distinct ids (one query), by id.
func (s *Service) liveCards(ctx context.Context, project string, ids []string) (map[string]Card, error) {
	byID := make(map[string]Card, len(ids))
	if len(ids) == 0 {
		return byID, nil
	}
	rows, err := s.as(project).GetLiveCards(ctx, cardboxdb.GetLiveCardsParams{TenantID: project, CardIds: ids, Now: s.now()})
	if err != nil {
		return nil, fmt.Errorf("get cards: %w", err)
	}
	for i := range rows {
		byID[rows[i].CardID] = cardFromRow(rows[i])
	}
	return byID, nil
}

// liveJSON returns the JSON of the live cards among distinct ids, by id.
//
// With the cache on, a cached card is served without asking Postgres about
// it when its project's change counter (CardChanges, migration 00021) is
// where it was when a read last saw the card live, and the card has not
// expired since (its expiry is cached with it): no card of the project
// was deleted, purged or changed since, by anyone. That costs one
// single-row query however many cards are asked for. Cards cached before
// the last change are checked again (LiveCardVersions); cards the cache
// lacks are read in full (GetLiveCards).
func (s *Service) liveJSON(ctx context.Context, project string, ids []string) (map[string]json.RawMessage, error) {
	if len(ids) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	now := s.now()
	var stamp uint64
	exists := true
	if s.cache != nil {
		var err error
		if stamp, exists, err = s.cardStamp(ctx, project); err != nil {
			return nil, err
		}
	}
	return s.liveJSONAt(ctx, project, ids, now, stamp, exists)
}

// liveJSONAt is liveJSON at a stamp the caller read (cardStamp): exists
// is false when the project has no live row.
func (s *Service) liveJSONAt(ctx context.Context, project string, ids []string, now time.Time, stamp uint64, exists bool) (map[string]json.RawMessage, error) {
	byID := make(map[string]json.RawMessage, len(ids))
	misses, err := s.fromCacheAt(ctx, project, ids, now, stamp, exists, byID)
	if err != nil {
		return nil, err
	}
	if len(misses) > 0 {
		// A card deleted since the counter was read is not read: it is
		// missing, as it would have been a moment later.
		if err := s.renderLive(ctx, project, misses, now, stamp, byID); err != nil {
			return nil, err
		}
	}
	if s.cache != nil && len(byID) < len(ids) {
		s.cache.ForgetDead(project, ids, byID)
	}
	return byID, nil
}

// fromCacheChecked serves into byID the cached cards among ids that are
// live at now, checking with Postgres those cached before the project's
// last change; it returns the ids the cache could not serve (all of them
// when it is off, none when the project does not exist) and the stamp to
// cache their rows with.
func (s *Service) fromCacheChecked(ctx context.Context, project string, ids []string, now time.Time, byID map[string]json.RawMessage) (misses []string, stamp uint64, err error) {
	if s.cache == nil {
		return ids, 0, nil
	}
	stamp, exists, err := s.cardStamp(ctx, project)
	if err != nil {
		return nil, 0, err
	}
	misses, err = s.fromCacheAt(ctx, project, ids, now, stamp, exists, byID)
	return misses, stamp, err
}

// fromCacheAt is fromCacheChecked at a stamp the caller read (cardStamp):
// exists is false when the project has no live row.
func (s *Service) fromCacheAt(ctx context.Context, project string, ids []string, now time.Time, stamp uint64, exists bool, byID map[string]json.RawMessage) (misses []string, err error) {
	if s.cache == nil {
		return ids, nil
	}
	if !exists { // no project, or a deleted one: no live cards
		return nil, nil
	}
	unchecked, misses := s.cache.Lookup(project, ids, now, stamp, byID)
	if len(unchecked) > 0 {
		if misses, err = s.recheck(ctx, project, unchecked, now, stamp, byID, misses); err != nil {
			return nil, err
		}
	}
	return misses, nil
}

// cardStamp reads the project's change counter as a cache stamp (the
// counter plus one: a stamp of 0 is an entry no read has checked);
// exists is false when the project has no row or was deleted.
func (s *Service) cardStamp(ctx context.Context, project string) (stamp uint64, exists bool, err error) {
	changes, err := s.as(project).CardChanges(ctx, project)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("get cards: %w", err)
	}
	return uint64(changes) + 1, true, nil
}

// recheck asks Postgres which of the cached cards are still live at the
// same version and expiry, serves and stamps those, and adds the other
// live ones (written again after a purge, or their expiry moved by SQL)
// to misses.
func (s *Service) recheck(ctx context.Context, project string, cached []cardcache.Card, now time.Time, stamp uint64, byID map[string]json.RawMessage, misses []string) ([]string, error) {
	ids := make([]string, len(cached))
	for i, c := range cached {
		ids[i] = c.ID
	}
	live, err := s.as(project).LiveCardVersions(ctx, cardboxdb.LiveCardVersionsParams{TenantID: project, CardIds: ids, Now: now})
	if err != nil {
		return nil, fmt.Errorf("get cards: %w", err)
	}
	if len(live.Positions) != len(live.Versions) || len(live.Positions) != len(live.Expiries) {
		return nil, fmt.Errorf("get cards: %d positions for %d versions and %d expiries", len(live.Positions), len(live.Versions), len(live.Expiries))
	}
	for i, pos := range live.Positions {
		if pos < 1 || int(pos) > len(cached) {
			return nil, fmt.Errorf("get cards: position %d out of 1..%d", pos, len(cached))
		}
		c := cached[pos-1]
		if live.Versions[i].UnixMicro() != c.Version || live.Expiries[i] != c.Expires {
			misses = append(misses, c.ID) // written again after a purge, or its expiry moved
			continue
		}
		// Checked after the counter was read: current at stamp at least.
		s.cache.Confirm(project, c.ID, c.Version, stamp)
		byID[c.ID] = c.JSON
	}
	return misses, nil
}

// renderLive reads the live cards among ids in full (one query), renders
// them into byID and caches them, stamped with stamp (read before the
// query, so no later than the rows).
func (s *Service) renderLive(ctx context.Context, project string, ids []string, now time.Time, stamp uint64, byID map[string]json.RawMessage) error {
	rows, err := s.as(project).GetLiveCards(ctx, cardboxdb.GetLiveCardsParams{TenantID: project, CardIds: ids, Now: now})
	if err != nil {
		return fmt.Errorf("get cards: %w", err)
	}
	for i := range rows {
		c := cardFromRow(rows[i])
		if s.cache == nil { // else the key's clones would be wasted
			byID[c.CardID] = c.AppendJSON(make([]byte, 0, c.jsonSize()))
			continue
		}
		byID[c.CardID] = s.cache.PutCard(project, c.CardID, c.CreatedAt.UnixMicro(), stamp, c.ExpiresAt, c.jsonSize(), c.AppendJSON)
	}
	return nil
}
