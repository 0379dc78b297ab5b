package cardbox

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cardboxhq/cardbox/cardbox/position"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// Zone is where an entry of a box sits: assembly keeps the permanent zone
// whole and gives up working entries first, then stable ones.
type Zone int16

// The zones, in box order.
const (
	ZonePermanent Zone = 0
	ZoneStable    Zone = 1
	ZoneWorking   Zone = 2
)

// ZoneNames are the zones' names, in box order.
var ZoneNames = []string{"permanent", "stable", "working"}

func (z Zone) String() string {
	if z < 0 || int(z) >= len(ZoneNames) {
		return "zone(" + strconv.Itoa(int(z)) + ")"
	}
	return ZoneNames[z]
}

// ParseZone reads a zone's name; field names the input for the error.
func ParseZone(field, name string) (Zone, error) {
	i := slices.Index(ZoneNames, name)
	if i < 0 {
		return 0, rules.Invalid(field, "unknown zone %q; zones are %s", name, strings.Join(ZoneNames, ", "))
	}
	return Zone(i), nil
}

// DefaultZone is the zone of a card of type typ when none is given:
// system cards (sys.*) and task instructions are permanent, the rest
// working.
func DefaultZone(typ string) Zone {
	if strings.HasPrefix(typ, "sys.") || typ == "task.instruction" {
		return ZonePermanent
	}
	return ZoneWorking
}

// Entry is one place of a card in a box. A box may hold a card several
// times; each place is its own entry.
type Entry struct {
	EntryID string
	CardID  string
	Zone    Zone
	// Position orders the entries of a zone (fractional index keys,
	// compared bytewise).
	Position string
	// Draft entries are kept in the box but left out of assembly.
	Draft bool
}

// before reports whether e sorts before o in a box.
func (e Entry) before(o Entry) bool {
	return e.Zone < o.Zone || (e.Zone == o.Zone && e.Position < o.Position)
}

// BoxEntries is a box's entries in box order (zone, then position).
type BoxEntries struct {
	BoxID string
	// Structured says the box has stored entries; false for a plain list
	// of card ids, whose entries are shown as they would be made by its
	// first edit (ids e1, e2... in list order, default zones).
	Structured bool
	Entries    []Entry
	UpdatedAt  time.Time
}

// layout is a box's entries being edited.
type layout struct {
	entries []Entry
	seq     int64 // the last entry number given out
}

func (l *layout) sort() {
	slices.SortStableFunc(l.entries, func(a, b Entry) int {
		if a.before(b) {
			return -1
		}
		if b.before(a) {
			return 1
		}
		return 0
	})
}

func (l *layout) newID() string {
	l.seq++
	return "e" + strconv.FormatInt(l.seq, 10)
}

func (l *layout) find(id string) int {
	return slices.IndexFunc(l.entries, func(e Entry) bool { return e.EntryID == id })
}

// zoneSpan returns the range of l.entries in zone z.
func (l *layout) zoneSpan(z Zone) (lo, hi int) {
	lo = slices.IndexFunc(l.entries, func(e Entry) bool { return e.Zone >= z })
	if lo < 0 {
		return len(l.entries), len(l.entries)
	}
	hi = lo
	for hi < len(l.entries) && l.entries[hi].Zone == z {
		hi++
	}
	return lo, hi
}

// keyAt returns a position key for a new entry at index i of zone z's
// entries (0: first, the zone's length: last), skipping the entry skip.
func (l *layout) keyAt(z Zone, i int, skip string) (string, error) {
	var zone []Entry
	for _, e := range l.entries {
		if e.Zone == z && e.EntryID != skip {
			zone = append(zone, e)
		}
	}
	var lo, hi string
	if i > 0 {
		lo = zone[i-1].Position
	}
	if i < len(zone) {
		hi = zone[i].Position
	}
	return position.Between(lo, hi)
}

func (l *layout) rows() (cards, ids []string, zones []int16, positions []string, drafts []bool) {
	for _, e := range l.entries {
		cards = append(cards, e.CardID)
		ids = append(ids, e.EntryID)
		zones = append(zones, int16(e.Zone))
		positions = append(positions, e.Position)
		drafts = append(drafts, e.Draft)
	}
	return
}

// layoutFromRows reads stored entries.
func layoutFromRows(cards, ids []string, zones []int16, positions []string, drafts []bool, seq int64) *layout {
	l := &layout{seq: seq, entries: make([]Entry, len(ids))}
	for i := range ids {
		l.entries[i] = Entry{EntryID: ids[i], CardID: cards[i], Zone: Zone(zones[i]), Position: positions[i], Draft: drafts[i]}
	}
	return l
}

// plainLayout makes the entries of a plain list of card ids: ids e1, e2...
// in list order, each card in its default zone, positions in list order
// within each zone.
func (s *Service) plainLayout(ctx context.Context, q *db.Queries, project string, cardIDs []string) (*layout, error) {
	zones := make(map[string]Zone, len(cardIDs))
	if err := defaultZones(ctx, q, project, rules.Dedupe(cardIDs), zones); err != nil {
		return nil, err
	}
	return plainLayoutOf(cardIDs, zones)
}

// defaultZones adds to zones the default zone of each card among distinct
// ids, whatever its state; an absent card's is its type's ("").
func defaultZones(ctx context.Context, q *db.Queries, project string, ids []string, zones map[string]Zone) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := q.CardTypes(ctx, db.CardTypesParams{TenantID: project, CardIds: ids})
	if err != nil {
		return fmt.Errorf("read card types: %w", err)
	}
	for _, id := range ids {
		zones[id] = DefaultZone("")
	}
	for _, r := range rows {
		zones[r.CardID] = DefaultZone(r.Type)
	}
	return nil
}

// plainLayoutOf makes the entries of a plain list of card ids, given the
// default zone of each card.
func plainLayoutOf(cardIDs []string, zones map[string]Zone) (*layout, error) {
	l := &layout{}
	last := make([]string, len(ZoneNames))
	for _, id := range cardIDs {
		z := zones[id]
		key, err := position.Between(last[z], "")
		if err != nil {
			return nil, err
		}
		last[z] = key
		l.entries = append(l.entries, Entry{EntryID: l.newID(), CardID: id, Zone: z, Position: key})
	}
	l.sort()
	return l, nil
}

// Entries returns a box's entries in box order.
func (s *Service) Entries(ctx context.Context, project, boxID string) (BoxEntries, error) {
	if err := checkBoxID(project, boxID); err != nil {
		return BoxEntries{}, err
	}
	q := s.as(project)
	row, err := q.GetBoxEntries(ctx, db.GetBoxEntriesParams{TenantID: project, BoxID: boxID})
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
	return BoxEntries{BoxID: boxID, Structured: row.Structured, Entries: l.entries, UpdatedAt: row.UpdatedAt}, nil
}

func (s *Service) layoutOf(ctx context.Context, q *db.Queries, project string, structured bool, cards, ids []string,
	zones []int16, positions []string, drafts []bool, seq int64) (*layout, error) {
	if structured {
		return layoutFromRows(cards, ids, zones, positions, drafts, seq), nil
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
func (s *Service) editBox(ctx context.Context, project, boxID string, edit func(l *layout) error) (BoxEntries, error) {
	var out BoxEntries
	err := s.inTx(ctx, project, func(q *db.Queries) error {
		row, err := q.LockBoxEntries(ctx, db.LockBoxEntriesParams{TenantID: project, BoxID: boxID})
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
		if len(l.entries) > rules.MaxBoxCards {
			return rules.Invalid("card_ids", "a box holds at most %d card ids; this edit would make %d", rules.MaxBoxCards, len(l.entries))
		}
		l.sort()
		out, err = saveLayout(ctx, q, project, boxID, l, s.now())
		return err
	})
	return out, err
}

func saveLayout(ctx context.Context, q *db.Queries, project, boxID string, l *layout, now time.Time) (BoxEntries, error) {
	cards, ids, zones, positions, drafts := l.rows()
	updated, err := q.SaveBoxEntries(ctx, db.SaveBoxEntriesParams{
		TenantID: project, BoxID: boxID, CardIds: nonNil(cards), EntryIds: nonNil(ids), Zones: nonNilOf(zones),
		Positions: nonNil(positions), Drafts: nonNilOf(drafts), EntrySeq: l.seq, Now: now,
	})
	if err != nil {
		return BoxEntries{}, fmt.Errorf("save entries of box %q: %w", boxID, err)
	}
	return BoxEntries{BoxID: boxID, Structured: true, Entries: l.entries, UpdatedAt: updated}, nil
}

func nonNilOf[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Place says where new or moved entries go: after or before an entry
// (of the same zone, which is then the zone), at an index of a zone, or
// (none of them) at the end of the zone.
type Place struct {
	// Zone is "" for the default: the anchor's zone, else each card's
	// default zone (DefaultZone).
	Zone          string
	After, Before string
	// Index is a 0-based place among the zone's entries; nil for none.
	Index *int
}

// resolve returns the zone and the index among the zone's entries (moving
// skips the moved entry) where a place puts an entry; fallback is the
// zone when the place names none.
func (p Place) resolve(l *layout, fallback Zone, skip string) (Zone, int, error) {
	zone := fallback
	if p.Zone != "" {
		z, err := ParseZone("zone", p.Zone)
		if err != nil {
			return 0, 0, err
		}
		zone = z
	}
	named := 0
	for _, set := range []bool{p.After != "", p.Before != "", p.Index != nil} {
		if set {
			named++
		}
	}
	if named > 1 {
		return 0, 0, rules.Invalid("after", "give at most one of after, before and index")
	}
	var zoneIDs []string
	anchor := p.After + p.Before
	if anchor != "" {
		field := "after"
		if p.Before != "" {
			field = "before"
		}
		i := l.find(anchor)
		if i < 0 {
			return 0, 0, rules.Invalid(field, "entry %q is not in this box", anchor)
		}
		if anchor == skip {
			return 0, 0, rules.Invalid(field, "an entry cannot be placed next to itself")
		}
		if p.Zone != "" && l.entries[i].Zone != zone {
			return 0, 0, rules.Invalid(field, "entry %q is in the %s zone, not %s", anchor, l.entries[i].Zone, zone)
		}
		zone = l.entries[i].Zone
	}
	for _, e := range l.entries {
		if e.Zone == zone && e.EntryID != skip {
			zoneIDs = append(zoneIDs, e.EntryID)
		}
	}
	switch {
	case p.After != "":
		return zone, slices.Index(zoneIDs, p.After) + 1, nil
	case p.Before != "":
		return zone, slices.Index(zoneIDs, p.Before), nil
	case p.Index != nil:
		if *p.Index < 0 || *p.Index > len(zoneIDs) {
			return 0, 0, rules.Invalid("index", "%d is outside the %s zone, which holds %d entries (0..%d)", *p.Index, zone, len(zoneIDs), len(zoneIDs))
		}
		return zone, *p.Index, nil
	}
	return zone, len(zoneIDs), nil
}

// InsertEntries adds card ids to a box at place, in the order given, and
// returns the new entries. Each card must be live in the project.
func (s *Service) InsertEntries(ctx context.Context, project, boxID string, cardIDs []string, place Place, draft bool) ([]Entry, error) {
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
	var added []Entry
	_, err = s.editBox(ctx, project, boxID, func(l *layout) error {
		added, err = insertInto(l, cardIDs, types, place, draft)
		return err
	})
	return added, err
}

func insertInto(l *layout, cardIDs []string, types map[string]string, place Place, draft bool) ([]Entry, error) {
	var added []Entry
	anchored := place.Zone != "" || place.After != "" || place.Before != "" || place.Index != nil
	for k, id := range cardIDs {
		zone, i, err := place.resolve(l, DefaultZone(types[id]), "")
		if err != nil {
			return nil, err
		}
		key, err := l.keyAt(zone, i, "")
		if err != nil {
			return nil, err
		}
		e := Entry{EntryID: l.newID(), CardID: id, Zone: zone, Position: key, Draft: draft}
		l.entries = append(l.entries, e)
		l.sort()
		added = append(added, e)
		if anchored && k < len(cardIDs)-1 {
			// The next card goes right after this one.
			place = Place{After: e.EntryID}
		}
	}
	return added, nil
}

func (s *Service) cardTypes(ctx context.Context, project string, ids []string) (map[string]string, error) {
	rows, err := s.as(project).CardTypes(ctx, db.CardTypesParams{TenantID: project, CardIds: rules.Dedupe(ids)})
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
	Place Place
	Draft *bool
}

// ChangeEntry moves an entry or changes whether it is a draft, and
// returns it as it is then.
func (s *Service) ChangeEntry(ctx context.Context, project, boxID, entryID string, c EntryChange) (Entry, error) {
	if err := checkBoxID(project, boxID); err != nil {
		return Entry{}, err
	}
	var out Entry
	_, err := s.editBox(ctx, project, boxID, func(l *layout) error {
		i := l.find(entryID)
		if i < 0 {
			return rules.NotFound("entry", entryID)
		}
		e := l.entries[i]
		if c.Move {
			zone, at, err := c.Place.resolve(l, e.Zone, entryID)
			if err != nil {
				return err
			}
			if e.Position, err = l.keyAt(zone, at, entryID); err != nil {
				return err
			}
			e.Zone = zone
		}
		if c.Draft != nil {
			e.Draft = *c.Draft
		}
		l.entries[i], out = e, e
		return nil
	})
	return out, err
}

// RemoveEntry takes an entry out of a box.
func (s *Service) RemoveEntry(ctx context.Context, project, boxID, entryID string) error {
	if err := checkBoxID(project, boxID); err != nil {
		return err
	}
	_, err := s.editBox(ctx, project, boxID, func(l *layout) error {
		i := l.find(entryID)
		if i < 0 {
			return rules.NotFound("entry", entryID)
		}
		l.entries = slices.Delete(l.entries, i, i+1)
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
	zone, err := ParseZone("zone", zoneName)
	if err != nil {
		return BoxEntries{}, err
	}
	if err := rules.UniqueIDs("entry_ids", entryIDs); err != nil {
		return BoxEntries{}, err
	}
	return s.editBox(ctx, project, boxID, func(l *layout) error {
		lo, hi := l.zoneSpan(zone)
		if hi-lo != len(entryIDs) {
			return rules.Invalid("entry_ids", "the %s zone holds %d entries; name each of them once, got %d", zone, hi-lo, len(entryIDs))
		}
		prev := ""
		for k, id := range entryIDs {
			i := l.find(id)
			if i < 0 || l.entries[i].Zone != zone {
				return rules.Invalid(fmt.Sprintf("entry_ids[%d]", k), "entry %q is not in the %s zone", id, zone)
			}
			if l.entries[i].Position <= prev && prev != "" {
				key, err := position.Between(prev, "")
				if err != nil {
					return err
				}
				l.entries[i].Position = key
			}
			prev = l.entries[i].Position
		}
		return nil
	})
}

// appendEntries appends card ids to a box with entries: each at the end of
// its default zone (or of zone, when given).
func (s *Service) appendEntries(ctx context.Context, project, boxID string, cardIDs []string, zone string) (Appended, string, error) {
	types, err := s.cardTypes(ctx, project, cardIDs)
	if err != nil {
		return Appended{}, "", err
	}
	var last Entry
	box, err := s.editBox(ctx, project, boxID, func(l *layout) error {
		added, err := insertInto(l, cardIDs, types, Place{Zone: zone}, false)
		if err == nil {
			last = added[len(added)-1]
		}
		return err
	})
	if err != nil {
		return Appended{}, "", err
	}
	return Appended{ProjectID: project, BoxID: boxID, Length: len(box.Entries), UpdatedAt: box.UpdatedAt}, throughCursor(last), nil
}

// Cursors of a box with entries name a place in the box (zone and
// position), so that inserts and removals elsewhere do not shift pages:
// "b<zone>.<position>" pages the entries before that place, and
// "t<zone>.<position>" those up to it and including it.

func beforeCursor(e Entry) string  { return "b" + strconv.Itoa(int(e.Zone)) + "." + e.Position }
func throughCursor(e Entry) string { return "t" + strconv.Itoa(int(e.Zone)) + "." + e.Position }

// parseEntryCursor reads an entry cursor; ok is false for a cursor that
// is not one (a plain box's numeric cursor, or empty).
func parseEntryCursor(cursor string) (place Entry, through, ok bool, err error) {
	if cursor == "" || (cursor[0] != 'b' && cursor[0] != 't') {
		return Entry{}, false, false, nil
	}
	bad := rules.Invalid("cursor", "%q is not a cursor returned by this API", cursor)
	zone, pos, found := strings.Cut(cursor[1:], ".")
	z, zerr := strconv.Atoi(zone)
	if !found || zerr != nil || z < 0 || z >= len(ZoneNames) || position.Validate(pos) != nil {
		return Entry{}, false, false, bad
	}
	return Entry{Zone: Zone(z), Position: pos}, cursor[0] == 't', true, nil
}

// entryPageEnd is where a page that ends at cursor ends in entries (an
// index past its last entry).
func entryPageEnd(entries []Entry, cursor string) (int, error) {
	place, through, ok, err := parseEntryCursor(cursor)
	if err != nil {
		return 0, err
	}
	if !ok {
		before, err := parseCursor(cursor)
		if err != nil {
			return 0, err
		}
		if before < 0 || int(before) > len(entries) {
			return len(entries), nil
		}
		return int(before), nil
	}
	end, _ := slices.BinarySearchFunc(entries, place, func(e, p Entry) int {
		switch {
		case e.before(p):
			return -1
		case p.before(e):
			return 1
		}
		return 0
	})
	if through && end < len(entries) && !place.before(entries[end]) {
		end++
	}
	return end, nil
}
