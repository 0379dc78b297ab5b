package layout

import (
	"fmt"
	"slices"

	"github.com/cardboxhq/cardbox/cardbox/position"
	"github.com/cardboxhq/cardbox/cardbox/rules"
)

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
func (p Place) resolve(l *Layout, fallback Zone, skip string) (Zone, int, error) {
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
		i := l.Find(anchor)
		if i < 0 {
			return 0, 0, rules.Invalid(field, "entry %q is not in this box", anchor)
		}
		if anchor == skip {
			return 0, 0, rules.Invalid(field, "an entry cannot be placed next to itself")
		}
		if p.Zone != "" && l.Entries[i].Zone != zone {
			return 0, 0, rules.Invalid(field, "entry %q is in the %s zone, not %s", anchor, l.Entries[i].Zone, zone)
		}
		zone = l.Entries[i].Zone
	}
	for _, e := range l.Entries {
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

// Insert adds card ids at place, in the order given, and returns the new
// entries; types are the cards' types (by card id), whose default zones
// place a card when place names no zone.
func (l *Layout) Insert(cardIDs []string, types map[string]string, place Place, draft bool) ([]Entry, error) {
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
		e := Entry{EntryID: l.NewID(), CardID: id, Zone: zone, Position: key, Draft: draft}
		l.Entries = append(l.Entries, e)
		l.Sort()
		added = append(added, e)
		if anchored && k < len(cardIDs)-1 {
			// The next card goes right after this one.
			place = Place{After: e.EntryID}
		}
	}
	return added, nil
}

// Move puts the entry at index i at place; its zone stays when place
// names none.
func (l *Layout) Move(i int, place Place) error {
	e := &l.Entries[i]
	zone, at, err := place.resolve(l, e.Zone, e.EntryID)
	if err != nil {
		return err
	}
	key, err := l.keyAt(zone, at, e.EntryID)
	if err != nil {
		return err
	}
	e.Zone, e.Position = zone, key
	return nil
}

// Reorder puts zone's entries in the order given, which must name each
// of them once. Entries already in order keep their positions; the
// others get new ones.
func (l *Layout) Reorder(zone Zone, entryIDs []string) error {
	lo, hi := l.zoneSpan(zone)
	if hi-lo != len(entryIDs) {
		return rules.Invalid("entry_ids", "the %s zone holds %d entries; name each of them once, got %d", zone, hi-lo, len(entryIDs))
	}
	prev := ""
	for k, id := range entryIDs {
		i := l.Find(id)
		if i < 0 || l.Entries[i].Zone != zone {
			return rules.Invalid(fmt.Sprintf("entry_ids[%d]", k), "entry %q is not in the %s zone", id, zone)
		}
		if l.Entries[i].Position <= prev && prev != "" {
			key, err := position.Between(prev, "")
			if err != nil {
				return err
			}
			l.Entries[i].Position = key
		}
		prev = l.Entries[i].Position
	}
	return nil
}
