package cardbox

import (
	"context"
	"fmt"

	"github.com/cardboxhq/cardbox/cardbox/internal/cardboxdb"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/position"
	"github.com/cardboxhq/cardbox/cardbox/rules"
)

// DerivedCard is a card made from a CXDB turn. The turn's context and id
// are stored with the card (cards.cxdb_context_id, cxdb_turn_id), so that
// a deletion of the turn can delete the cards made from it.
type DerivedCard struct {
	Card NewCard
	// Type is Card's metadata.type (its default zone).
	Type              string
	ContextID, TurnID uint64
}

// derivedChunk is how many derived cards one statement inserts.
const derivedChunk = 1000

// SaveDerivedBox writes derived cards, once per turn (a card that exists
// and was derived from the same turn is reused, whatever its content),
// then makes box boxID (created, or replaced) of them in the order given,
// each in its default zone. An id that exists and was not derived from
// that turn is a ConflictError.
func (s *Service) SaveDerivedBox(ctx context.Context, project, boxID string, cards []DerivedCard) (BoxEntries, error) {
	if err := checkBoxID(project, boxID); err != nil {
		return BoxEntries{}, err
	}
	if len(cards) > rules.MaxBoxCards {
		return BoxEntries{}, rules.Invalid("up_to_turn_id", "a box holds at most %d card ids; the chain has %d turns", rules.MaxBoxCards, len(cards))
	}
	norm := make([]normalCard, len(cards))
	for i, c := range cards {
		n, err := normalize(c.Card)
		if err != nil {
			return BoxEntries{}, fmt.Errorf("turn %d: %w", c.TurnID, err)
		}
		n.cxdbContext, n.cxdbTurn = c.ContextID, c.TurnID
		norm[i] = n
	}
	if err := s.admitWrite(ctx, project, cardBytes(norm)); err != nil {
		return BoxEntries{}, err
	}
	if err := s.insertDerived(ctx, project, norm); err != nil {
		return BoxEntries{}, err
	}
	l := &layout.Layout{}
	last := make([]string, len(layout.ZoneNames))
	for _, c := range cards {
		z := layout.DefaultZone(c.Type)
		key, err := position.Between(last[z], "")
		if err != nil {
			return BoxEntries{}, err
		}
		last[z] = key
		l.Entries = append(l.Entries, layout.Entry{EntryID: l.NewID(), CardID: c.Card.CardID, Zone: z, Position: key})
	}
	return s.writeEntries(ctx, project, boxID, l.Entries, nil)
}

func (s *Service) insertDerived(ctx context.Context, project string, norm []normalCard) error {
	if err := s.admit(ctx, project); err != nil {
		return err
	}
	defer s.gate.Leave()
	return s.inTx(ctx, project, func(q *cardboxdb.Queries) error {
		for start := 0; start < len(norm); start += derivedChunk {
			chunk := norm[start:min(len(norm), start+derivedChunk)]
			stored, err := insertNew(ctx, q, project, s, chunk)
			if err != nil {
				return err
			}
			if err := checkDerived(ctx, q, project, s, chunk, stored); err != nil {
				return err
			}
		}
		return nil
	})
}

// insertNew inserts the cards that do not exist yet and returns their ids.
func insertNew(ctx context.Context, q *cardboxdb.Queries, project string, s *Service, chunk []normalCard) (map[string]bool, error) {
	p, err := insertParams(project, s.now(), chunk)
	if err != nil {
		return nil, err
	}
	rows, err := q.InsertCards(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("insert derived cards: %w", err)
	}
	stored := make(map[string]bool, len(rows))
	for _, r := range rows {
		stored[r.CardID] = true
	}
	return stored, nil
}

// checkDerived checks that the cards that existed were derived from the
// same turns.
func checkDerived(ctx context.Context, q *cardboxdb.Queries, project string, s *Service, chunk []normalCard, stored map[string]bool) error {
	want := map[string]uint64{}
	var ids []string
	for _, n := range chunk {
		if !stored[n.ID] {
			want[n.ID] = n.cxdbTurn
			ids = append(ids, n.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := q.DerivedCards(ctx, cardboxdb.DerivedCardsParams{TenantID: project, CardIds: ids, Now: s.now()})
	if err != nil {
		return fmt.Errorf("check derived cards: %w", err)
	}
	var conflicts []string
	for _, r := range rows {
		if uint64(r.CxdbTurnID) != want[r.CardID] {
			conflicts = append(conflicts, r.CardID)
		}
	}
	if len(conflicts) > 0 {
		return &rules.ConflictError{CardIDs: conflicts}
	}
	return nil
}
