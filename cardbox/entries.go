package cardbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cardboxhq/cardbox/cardbox/internal/cardboxdb"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/cardbox/rules"
)

// BoxEntries is a box's entries in box order (zone, then position).
type BoxEntries struct {
	BoxID string
	// Structured says the box has stored entries; false for a plain list
	// of card ids, whose entries are shown as they would be made by its
	// first edit (ids e1, e2... in list order, default zones).
	Structured bool
	Entries    []layout.Entry
	UpdatedAt  time.Time
}

// plainLayout makes the entries of a plain list of card ids: ids e1, e2...
// in list order, each card in its default zone, positions in list order
// within each zone.
func (s *Service) plainLayout(ctx context.Context, q *cardboxdb.Queries, project string, cardIDs []string) (*layout.Layout, error) {
	zones := make(map[string]layout.Zone, len(cardIDs))
	if err := defaultZones(ctx, q, project, rules.Dedupe(cardIDs), zones); err != nil {
		return nil, err
	}
	return layout.Plain(cardIDs, func(id string) layout.Zone { return zones[id] })
}

// defaultZones adds to zones the default zone of each card among distinct
// ids, whatever its state; an absent card's is its type's ("").
func defaultZones(ctx context.Context, q *cardboxdb.Queries, project string, ids []string, zones map[string]layout.Zone) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := q.CardTypes(ctx, cardboxdb.CardTypesParams{TenantID: project, CardIds: ids})
	if err != nil {
		return fmt.Errorf("read card types: %w", err)
	}
	for _, id := range ids {
		zones[id] = layout.DefaultZone("")
	}
	for _, r := range rows {
		zones[r.CardID] = layout.DefaultZone(r.Type)
	}
	return nil
}

// Entries returns a box's entries in box order.
func (s *Service) Entries(ctx context.Context, project, boxID string) (BoxEntries, error) {
	if err := checkBoxID(project, boxID); err != nil {
		return BoxEntries{}, err
	}
	q := s.as(project)
	row, err := q.GetBoxEntries(ctx, cardboxdb.GetBoxEntriesParams{TenantID: project, BoxID: boxID})
	if isNoRows(err) {
		return BoxEntries{}, rules.NotFound("box", boxID)
	}
	if err != nil {
		return BoxEntries{}, fmt.Errorf("read entries of box %q: %w", boxID, err)
	}
	l, err := s.layoutOf(ctx, q, project, row.Structured, row.CardIds, row.EntryIds, row.Zones, row.Positions, row.Drafts, row.EntrySeq)
	if err != nil {
		return BoxEntries{}, err
	}
	return BoxEntries{BoxID: boxID, Structured: row.Structured, Entries: l.Entries, UpdatedAt: row.UpdatedAt}, nil
}

func (s *Service) layoutOf(ctx context.Context, q *cardboxdb.Queries, project string, structured bool, cards, ids []string,
	zones []int16, positions []string, drafts []bool, seq int64) (*layout.Layout, error) {
	if structured {
		return layout.FromRows(cards, ids, zones, positions, drafts, seq), nil
	}
	return s.plainLayout(ctx, q, project, cards)
}

func checkBoxID(project, boxID string) error {
	if err := checkProject(project); err != nil {
		return err
	}
	return rules.ValidateID("box_id", boxID)
}

// editBox runs edit on a box's entries under the box's row lock and
// stores the result: concurrent edits of one box run one after another,
// each on the entries the one before left.
func (s *Service) editBox(ctx context.Context, project, boxID string, edit func(l *layout.Layout) error) (BoxEntries, error) {
	var out BoxEntries
	err := s.inTx(ctx, project, func(q *cardboxdb.Queries) error {
		row, err := q.LockBoxEntries(ctx, cardboxdb.LockBoxEntriesParams{TenantID: project, BoxID: boxID})
		if isNoRows(err) {
			return rules.NotFound("box", boxID)
		}
		if err != nil {
			return fmt.Errorf("lock box %q: %w", boxID, err)
		}
		l, err := s.layoutOf(ctx, q, project, row.Structured, row.CardIds, row.EntryIds, row.Zones, row.Positions, row.Drafts, row.EntrySeq)
		if err != nil {
			return err
		}
		if err := edit(l); err != nil {
			return err
		}
		if len(l.Entries) > rules.MaxBoxCards {
			return rules.Invalid("card_ids", "a box holds at most %d card ids; this edit would make %d", rules.MaxBoxCards, len(l.Entries))
		}
		l.Sort()
		out, err = saveLayout(ctx, q, project, boxID, l, s.now())
		return err
	})
	return out, err
}

func saveLayout(ctx context.Context, q *cardboxdb.Queries, project, boxID string, l *layout.Layout, now time.Time) (BoxEntries, error) {
	cards, ids, zones, positions, drafts := l.Rows()
	updated, err := q.SaveBoxEntries(ctx, cardboxdb.SaveBoxEntriesParams{
		TenantID: project, BoxID: boxID, CardIds: nonNil(cards), EntryIds: nonNil(ids), Zones: nonNilOf(zones),
		Positions: nonNil(positions), Drafts: nonNilOf(drafts), EntrySeq: l.Seq, Now: now,
	})
	if err != nil {
		return BoxEntries{}, fmt.Errorf("save entries of box %q: %w", boxID, err)
	}
	return BoxEntries{BoxID: boxID, Structured: true, Entries: l.Entries, UpdatedAt: updated}, nil
}

func nonNilOf[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// InsertEntries adds card ids to a box at place, in the order given, and
// returns the new entries. Each card must be live in the project.
func (s *Service) InsertEntries(ctx context.Context, project, boxID string, cardIDs []string, place layout.Place, draft bool) ([]layout.Entry, error) {
	if err := s.checkAppend(ctx, project, boxID, cardIDs); err != nil {
		return nil, err
	}
	if err := s.admitWrite(ctx, project, idBytes(cardIDs)); err != nil {
		return nil, err
	}
	types, err := s.cardTypes(ctx, project, cardIDs)
	if err != nil {
		return nil, err
	}
	var added []layout.Entry
	_, err = s.editBox(ctx, project, boxID, func(l *layout.Layout) error {
		added, err = l.Insert(cardIDs, types, place, draft)
		return err
	})
	return added, err
}

func (s *Service) cardTypes(ctx context.Context, project string, ids []string) (map[string]string, error) {
	rows, err := s.as(project).CardTypes(ctx, cardboxdb.CardTypesParams{TenantID: project, CardIds: rules.Dedupe(ids)})
	if err != nil {
		return nil, fmt.Errorf("read card types: %w", err)
	}
	types := make(map[string]string, len(rows))
	for _, r := range rows {
		types[r.CardID] = r.Type
	}
	return types, nil
}

// EntryChange changes one entry: moves it (Place, when Move) and/or sets
// whether it is a draft (Draft, when not nil).
type EntryChange struct {
	Move  bool
	Place layout.Place
	Draft *bool
}

// ChangeEntry moves an entry or changes whether it is a draft, and
// returns it as it is then.
func (s *Service) ChangeEntry(ctx context.Context, project, boxID, entryID string, c EntryChange) (layout.Entry, error) {
	if err := checkBoxID(project, boxID); err != nil {
		return layout.Entry{}, err
	}
	var out layout.Entry
	_, err := s.editBox(ctx, project, boxID, func(l *layout.Layout) error {
		i := l.Find(entryID)
		if i < 0 {
			return rules.NotFound("entry", entryID)
		}
		if c.Move {
			if err := l.Move(i, c.Place); err != nil {
				return err
			}
		}
		if c.Draft != nil {
			l.Entries[i].Draft = *c.Draft
		}
		out = l.Entries[i]
		return nil
	})
	return out, err
}

// RemoveEntry takes an entry out of a box.
func (s *Service) RemoveEntry(ctx context.Context, project, boxID, entryID string) error {
	if err := checkBoxID(project, boxID); err != nil {
		return err
	}
	_, err := s.editBox(ctx, project, boxID, func(l *layout.Layout) error {
		i := l.Find(entryID)
		if i < 0 {
			return rules.NotFound("entry", entryID)
		}
		l.Entries = slices.Delete(l.Entries, i, i+1)
		return nil
	})
	return err
}

// ReorderZone puts a zone's entries in the order given, which must name
// each of them once. Entries already in order keep their positions; the
// others get new ones.
func (s *Service) ReorderZone(ctx context.Context, project, boxID, zoneName string, entryIDs []string) (BoxEntries, error) {
	if err := checkBoxID(project, boxID); err != nil {
		return BoxEntries{}, err
	}
	zone, err := layout.ParseZone("zone", zoneName)
	if err != nil {
		return BoxEntries{}, err
	}
	if err := rules.UniqueIDs("entry_ids", entryIDs); err != nil {
		return BoxEntries{}, err
	}
	return s.editBox(ctx, project, boxID, func(l *layout.Layout) error {
		return l.Reorder(zone, entryIDs)
	})
}

// appendEntries appends card ids to a box with entries: each at the end of
// its default zone (or of zone, when given).
func (s *Service) appendEntries(ctx context.Context, project, boxID string, cardIDs []string, zone string) (Appended, string, error) {
	types, err := s.cardTypes(ctx, project, cardIDs)
	if err != nil {
		return Appended{}, "", err
	}
	var last layout.Entry
	box, err := s.editBox(ctx, project, boxID, func(l *layout.Layout) error {
		added, err := l.Insert(cardIDs, types, layout.Place{Zone: zone}, false)
		if err == nil {
			last = added[len(added)-1]
		}
		return err
	})
	if err != nil {
		return Appended{}, "", err
	}
	return Appended{ProjectID: project, BoxID: boxID, Length: len(box.Entries), UpdatedAt: box.UpdatedAt}, layout.ThroughCursor(last), nil
}
