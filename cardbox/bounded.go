package cardbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cardboxhq/cardbox/cardbox/answer"
	"github.com/cardboxhq/cardbox/cardbox/internal/cardboxdb"
	"github.com/cardboxhq/cardbox/cardbox/rules"
)

// Bounded reads (GetCardsJSONWithin, BoxCardsJSONWithin,
// GetBoxesJSONWithin) hold an answer to what a memory budget gives it: a
// card may be up to a request body, and a batch names up to MaxBatchIDs
// of them. Each card or box is measured before it is loaded (from the
// card cache, or by Postgres: LiveCardSizes, LiveBoxSizes) and asked of a
// Room in answer order; the read loads only what got room, and ends its
// answer before the first entry that did not.

// BoundedCardsJSON answers GetCardsJSONWithin.
type BoundedCardsJSON struct {
	CardsJSON
	// RemainingIDs are the requested ids from the first live card the
	// answer had no room for on, in request order without repeats; empty
	// when the answer holds every live card.
	RemainingIDs []string
}

// BoundedBoxesJSON answers GetBoxesJSONWithin.
type BoundedBoxesJSON struct {
	BoxesJSON
	// RemainingBoxIDs are the requested ids from the first live box the
	// answer had no room for on, in request order without repeats; empty
	// when the answer holds every live box.
	RemainingBoxIDs []string
}

// GetCardsJSONWithin reads the JSON of up to MaxBatchIDs live cards,
// holding its answer to what room gives it. Ids are deduplicated keeping
// the first occurrence; each live card, in request order, is asked of
// room before it is loaded, and the answer ends before the first that
// gets none.
func (s *Service) GetCardsJSONWithin(ctx context.Context, project string, cardIDs []string, room answer.Room) (BoundedCardsJSON, error) {
	if err := checkProject(project); err != nil {
		return BoundedCardsJSON{}, err
	}
	ids, err := rules.BatchIDs("card_ids", cardIDs)
	if err != nil {
		return BoundedCardsJSON{}, err
	}
	sized, err := s.sizeLive(ctx, project, ids)
	if err != nil {
		return BoundedCardsJSON{}, err
	}
	answered, live := len(ids), make([]string, 0, len(ids))
	for i, id := range ids {
		n, ok := sized.size(id)
		if !ok {
			continue
		}
		if err := answer.Ask(room, n+1, len(live) == 0); err != nil {
			if errors.Is(err, answer.ErrStop) {
				answered = i
				break
			}
			return BoundedCardsJSON{}, err
		}
		live = append(live, id)
	}
	byID, err := s.loadSized(ctx, sized, live)
	if err != nil {
		return BoundedCardsJSON{}, err
	}
	res := BoundedCardsJSON{
		CardsJSON:    CardsJSON{Cards: make([]json.RawMessage, 0, len(live)), MissingIDs: []string{}},
		RemainingIDs: append([]string{}, ids[answered:]...),
	}
	for _, id := range ids[:answered] {
		if c, ok := byID[id]; ok {
			res.Cards = append(res.Cards, c)
		} else {
			res.MissingIDs = append(res.MissingIDs, id)
		}
	}
	return res, nil
}

// BoxCardsJSONWithin returns one page of a box's live cards' JSON, in box
// order: the last limit card ids of the box, or the limit ids before
// cursor (from a previous page's NextCursor); absent, deleted and expired
// cards are left out. It holds the page to what room gives it: the
// page's live cards are asked of room from the newest back, and
// the page starts after the newest that gets none, its NextCursor there,
// so that paging on reads the rest.
func (s *Service) BoxCardsJSONWithin(ctx context.Context, project, boxID string, limit int, cursor string, room answer.Room) (CardPageJSON, error) {
	page, err := s.pageIDs(ctx, project, boxID, limit, cursor)
	if err != nil {
		return CardPageJSON{}, err
	}
	sized, err := s.sizeLive(ctx, project, rules.Dedupe(page.ids))
	if err != nil {
		return CardPageJSON{}, err
	}
	start, held := 0, 0
	for i := len(page.ids) - 1; i >= 0; i-- {
		n, ok := sized.size(page.ids[i])
		if !ok {
			continue
		}
		if err := answer.Ask(room, n+1, held == 0); err != nil {
			if errors.Is(err, answer.ErrStop) {
				start = i + 1
				break
			}
			return CardPageJSON{}, err
		}
		held++
	}
	ids := page.ids[start:]
	cards, err := s.loadSized(ctx, sized, rules.Dedupe(ids))
	if err != nil {
		return CardPageJSON{}, err
	}
	out := CardPageJSON{Cards: make([]json.RawMessage, 0, len(ids)), NextCursor: page.cursorBefore(start)}
	for _, id := range ids {
		if c, ok := cards[id]; ok {
			out.Cards = append(out.Cards, c)
		}
	}
	return out, nil
}

// GetBoxesJSONWithin reads up to MaxBatchIDs boxes and, when hydrating,
// the JSON of their last live cards, holding its answer to what room
// gives it: each live box, in request order, is asked of room before it
// is loaded, with its card and parent ids, and then again, when
// hydrating, for its live cards and the ids of its window that are
// missing; the answer ends before the first box that gets none.
func (s *Service) GetBoxesJSONWithin(ctx context.Context, project string, query BoxesQuery, room answer.Room) (BoundedBoxesJSON, error) {
	if err := checkProject(project); err != nil {
		return BoundedBoxesJSON{}, err
	}
	ids, err := rules.BatchIDs("box_ids", query.BoxIDs)
	if err != nil {
		return BoundedBoxesJSON{}, err
	}
	answered, boxes, err := s.loadBoxesWithin(ctx, project, ids, room)
	if err != nil {
		return BoundedBoxesJSON{}, err
	}
	if query.Hydrate && len(boxes) > 0 {
		var kept int
		if kept, err = s.hydrateWithin(ctx, project, ClampLimit(query.Limit), boxes, room); err != nil {
			return BoundedBoxesJSON{}, err
		}
		if kept < len(boxes) {
			answered, boxes = boxes[kept].position, boxes[:kept]
		}
	}
	res := BoundedBoxesJSON{
		BoxesJSON: BoxesJSON{
			Boxes: make([]HydratedBoxJSON, 0, len(boxes)), MissingBoxIDs: []string{}, MissingCardIDs: []string{},
		},
		RemainingBoxIDs: append([]string{}, ids[answered:]...),
	}
	next := 0
	for i, id := range ids[:answered] {
		if next < len(boxes) && boxes[next].position == i {
			res.Boxes = append(res.Boxes, boxes[next].HydratedBoxJSON)
			res.MissingCardIDs = append(res.MissingCardIDs, boxes[next].missing...)
			next++
		} else {
			res.MissingBoxIDs = append(res.MissingBoxIDs, id)
		}
	}
	return res, nil
}

// boundedBox is a box of a bounded batch read.
type boundedBox struct {
	HydratedBoxJSON
	position int      // in the request
	missing  []string // the ids of its window first found missing in it
}

// loadBoxesWithin measures the live boxes among ids, asks room for each in
// request order and loads those that got it; answered is how many of ids
// the answer reached.
func (s *Service) loadBoxesWithin(ctx context.Context, project string, ids []string, room answer.Room) (answered int, boxes []boundedBox, err error) {
	answered = len(ids)
	if len(ids) == 0 {
		return 0, nil, nil
	}
	sizes, err := s.as(project).LiveBoxSizes(ctx, cardboxdb.LiveBoxSizesParams{TenantID: project, BoxIds: ids})
	if err != nil {
		return 0, nil, fmt.Errorf("get boxes: %w", err)
	}
	byPosition, err := sizesByPosition(sizes.Positions, sizes.Sizes, ids)
	if err != nil {
		return 0, nil, fmt.Errorf("get boxes: %w", err)
	}
	var wanted []string
	for i, id := range ids {
		n, ok := byPosition[i]
		if !ok {
			continue
		}
		if err := answer.Ask(room, n+int64(answer.JSONStringBound(project))+1, len(wanted) == 0); err != nil {
			if errors.Is(err, answer.ErrStop) {
				answered = i
				break
			}
			return 0, nil, err
		}
		wanted = append(wanted, id)
	}
	if len(wanted) == 0 {
		return answered, nil, nil
	}
	rows, err := s.as(project).GetLiveBoxes(ctx, cardboxdb.GetLiveBoxesParams{TenantID: project, BoxIds: wanted})
	if err != nil {
		return 0, nil, fmt.Errorf("get boxes: %w", err)
	}
	byID := make(map[string]cardboxdb.GetLiveBoxesRow, len(rows))
	for _, r := range rows {
		byID[r.BoxID] = r
	}
	for i, id := range ids[:answered] {
		if r, ok := byID[id]; ok { // a box deleted since it was measured is missing
			boxes = append(boxes, boundedBox{HydratedBoxJSON: HydratedBoxJSON{Box: boxFromRow(cardboxdb.GetLiveBoxRow(r))}, position: i})
		}
	}
	return answered, boxes, nil
}

// hydrateWithin fills in the live cards among each box's last limit ids,
// asking room, box by box, for the box's cards and the ids of its window
// first found missing; it returns how many of the boxes, from the first,
// the answer keeps: those before the first that got no room. A box is
// answered whole or not at all, so the first box getting none fails the
// read.
func (s *Service) hydrateWithin(ctx context.Context, project string, limit int, boxes []boundedBox, room answer.Room) (kept int, err error) {
	var window []string
	for _, b := range boxes {
		window = append(window, tail(b.CardIDs, limit)...)
	}
	sized, err := s.sizeLive(ctx, project, rules.Dedupe(window))
	if err != nil {
		return 0, err
	}
	var load []string
	charged := make(map[string]struct{}) // missing ids charged
	for kept = 0; kept < len(boxes); kept++ {
		var n int64
		var live []string
		for _, id := range tail(boxes[kept].CardIDs, limit) {
			if size, ok := sized.size(id); ok {
				n += size + 1
				live = append(live, id)
			} else if _, dup := charged[id]; !dup {
				charged[id] = struct{}{}
				n += int64(answer.JSONStringBound(id)) + 1
			}
		}
		if err := answer.Ask(room, n, kept == 0); err != nil {
			if errors.Is(err, answer.ErrStop) {
				break
			}
			return 0, err
		}
		load = append(load, live...)
	}
	cards, err := s.loadSized(ctx, sized, rules.Dedupe(load))
	if err != nil {
		return 0, err
	}
	missing := make(map[string]struct{})
	for i := range boxes[:kept] {
		b := &boxes[i]
		b.Cards = []json.RawMessage{}
		for _, id := range tail(b.CardIDs, limit) {
			if c, ok := cards[id]; ok {
				b.Cards = append(b.Cards, c)
			} else if _, dup := missing[id]; !dup {
				missing[id] = struct{}{}
				b.missing = append(b.missing, id)
			}
		}
	}
	return kept, nil
}

// sizedCards is what a bounded read knows of the live cards among some
// ids before it loads them: the JSON of those the card cache holds, and
// at least the JSON size of the others.
type sizedCards struct {
	project string
	now     time.Time
	stamp   uint64
	cached  map[string]json.RawMessage
	sizes   map[string]int64
}

// size is at least the JSON size of the card id; false when it is not
// live.
func (c *sizedCards) size(id string) (int64, bool) {
	if js, ok := c.cached[id]; ok {
		return int64(len(js)), true
	}
	n, ok := c.sizes[id]
	return n, ok
}

func (c *sizedCards) isLive(id string) bool {
	_, ok := c.size(id)
	return ok
}

// sizeLive measures the live cards among distinct ids: the cache's from
// the cache (checked as liveJSON checks them), the others by Postgres.
func (s *Service) sizeLive(ctx context.Context, project string, ids []string) (*sizedCards, error) {
	c := &sizedCards{project: project, now: s.now(), cached: make(map[string]json.RawMessage), sizes: map[string]int64{}}
	if len(ids) == 0 {
		return c, nil
	}
	misses, stamp, err := s.fromCacheChecked(ctx, project, ids, c.now, c.cached)
	if err != nil {
		return nil, err
	}
	c.stamp = stamp
	if len(misses) > 0 {
		row, err := s.as(project).LiveCardSizes(ctx, cardboxdb.LiveCardSizesParams{TenantID: project, CardIds: misses, Now: c.now})
		if err != nil {
			return nil, fmt.Errorf("get cards: %w", err)
		}
		byPosition, err := sizesByPosition(row.Positions, row.Sizes, misses)
		if err != nil {
			return nil, fmt.Errorf("get cards: %w", err)
		}
		projectBytes := int64(answer.JSONStringBound(project))
		for i, n := range byPosition {
			c.sizes[misses[i]] = n + projectBytes
		}
	}
	if s.cache != nil && len(c.cached)+len(c.sizes) < len(ids) {
		for _, id := range ids {
			if !c.isLive(id) {
				s.cache.Drop(project, id)
			}
		}
	}
	return c, nil
}

// loadSized returns the JSON of the live cards among distinct ids, which
// sized measured: the cached ones as they were, the others read in full
// (a card deleted since it was measured is left out).
func (s *Service) loadSized(ctx context.Context, sized *sizedCards, ids []string) (map[string]json.RawMessage, error) {
	byID := make(map[string]json.RawMessage, len(ids))
	var uncached []string
	for _, id := range ids {
		if js, ok := sized.cached[id]; ok {
			byID[id] = js
		} else if _, ok := sized.sizes[id]; ok {
			uncached = append(uncached, id)
		}
	}
	if len(uncached) == 0 {
		return byID, nil
	}
	if err := s.renderLive(ctx, sized.project, uncached, sized.now, sized.stamp, byID); err != nil {
		return nil, err
	}
	return byID, nil
}

// sizesByPosition pairs the 1-based positions in ids a size query
// answered with its sizes, by 0-based position.
func sizesByPosition(positions []int32, sizes []int64, ids []string) (map[int]int64, error) {
	if len(positions) != len(sizes) {
		return nil, fmt.Errorf("%d positions for %d sizes", len(positions), len(sizes))
	}
	out := make(map[int]int64, len(positions))
	for i, pos := range positions {
		if pos < 1 || int(pos) > len(ids) {
			return nil, fmt.Errorf("position %d out of 1..%d", pos, len(ids))
		}
		out[int(pos)-1] = sizes[i]
	}
	return out, nil
}

// GetCardJSONWithin returns a live card's JSON, asking room for the card
// before it loads it; an absent, deleted or expired card is ErrNotFound.
func (s *Service) GetCardJSONWithin(ctx context.Context, project, cardID string, room answer.Room) (json.RawMessage, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	if err := rules.ValidateID("card_id", cardID); err != nil {
		return nil, err
	}
	res, err := s.GetCardsJSONWithin(ctx, project, []string{cardID}, room)
	if err != nil {
		return nil, err
	}
	if len(res.Cards) == 0 {
		return nil, rules.NotFound("card", cardID)
	}
	return res.Cards[0], nil
}

// LoadBoxWithin is LoadBox asking room for the box, measured by Postgres
// as GetBoxesJSONWithin measures one (LiveBoxSizes), before it loads it.
func (s *Service) LoadBoxWithin(ctx context.Context, project, boxID string, room answer.Room) (Box, error) {
	if err := checkProject(project); err != nil {
		return Box{}, err
	}
	if err := rules.ValidateID("box_id", boxID); err != nil {
		return Box{}, err
	}
	_, boxes, err := s.loadBoxesWithin(ctx, project, []string{boxID}, room)
	if err != nil {
		return Box{}, err
	}
	if len(boxes) == 0 {
		return Box{}, rules.NotFound("box", boxID)
	}
	return boxes[0].Box, nil
}

// BoxJSONSize is at least the JSON of the live box boxID as LoadBox
// answers it, measured by Postgres without loading it; false when there
// is no such box.
func (s *Service) BoxJSONSize(ctx context.Context, project, boxID string) (int64, bool, error) {
	if err := checkProject(project); err != nil {
		return 0, false, err
	}
	if err := rules.ValidateID("box_id", boxID); err != nil {
		return 0, false, err
	}
	row, err := s.as(project).LiveBoxSizes(ctx, cardboxdb.LiveBoxSizesParams{TenantID: project, BoxIds: []string{boxID}})
	if err != nil {
		return 0, false, fmt.Errorf("measure box %q: %w", boxID, err)
	}
	if len(row.Sizes) == 0 {
		return 0, false, nil
	}
	return row.Sizes[0] + int64(answer.JSONStringBound(project)), true, nil
}
