// Package layout holds a box's entries and the rules of editing them,
// without storage: zones, fractional positions, places to insert at,
// moves and reorders that never renumber the box, the entries a plain
// list of card ids stands for, the cursors that page a box by place, and
// the diff of two states of a box. package cardbox loads and stores
// layouts under the box's row lock.
package layout

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cardboxhq/cardbox/cardbox/position"
	"github.com/cardboxhq/cardbox/cardbox/rules"
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

// Before reports whether e sorts before o in a box.
func (e Entry) Before(o Entry) bool {
	return e.Zone < o.Zone || (e.Zone == o.Zone && e.Position < o.Position)
}

// Layout is a box's entries being edited.
type Layout struct {
	// Entries are in box order after Sort.
	Entries []Entry
	// Seq is the last entry number given out (entry ids are "e" and a
	// number, never reused).
	Seq int64
}

// Sort puts the entries in box order, keeping the order of equals.
func (l *Layout) Sort() {
	slices.SortStableFunc(l.Entries, func(a, b Entry) int {
		if a.Before(b) {
			return -1
		}
		if b.Before(a) {
			return 1
		}
		return 0
	})
}

// NewID gives out the next entry id.
func (l *Layout) NewID() string {
	l.Seq++
	return "e" + strconv.FormatInt(l.Seq, 10)
}

// Find returns the index of entry id, or -1.
func (l *Layout) Find(id string) int {
	return slices.IndexFunc(l.Entries, func(e Entry) bool { return e.EntryID == id })
}

// zoneSpan returns the range of l.Entries in zone z.
func (l *Layout) zoneSpan(z Zone) (lo, hi int) {
	lo = slices.IndexFunc(l.Entries, func(e Entry) bool { return e.Zone >= z })
	if lo < 0 {
		return len(l.Entries), len(l.Entries)
	}
	hi = lo
	for hi < len(l.Entries) && l.Entries[hi].Zone == z {
		hi++
	}
	return lo, hi
}

// keyAt returns a position key for a new entry at index i of zone z's
// entries (0: first, the zone's length: last), skipping the entry skip.
func (l *Layout) keyAt(z Zone, i int, skip string) (string, error) {
	var zone []Entry
	for _, e := range l.Entries {
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

// Rows returns the entries as the columns they are stored in.
func (l *Layout) Rows() (cards, ids []string, zones []int16, positions []string, drafts []bool) {
	for _, e := range l.Entries {
		cards = append(cards, e.CardID)
		ids = append(ids, e.EntryID)
		zones = append(zones, int16(e.Zone))
		positions = append(positions, e.Position)
		drafts = append(drafts, e.Draft)
	}
	return
}

// FromRows reads stored entries.
func FromRows(cards, ids []string, zones []int16, positions []string, drafts []bool, seq int64) *Layout {
	l := &Layout{Seq: seq, Entries: make([]Entry, len(ids))}
	for i := range ids {
		l.Entries[i] = Entry{EntryID: ids[i], CardID: cards[i], Zone: Zone(zones[i]), Position: positions[i], Draft: drafts[i]}
	}
	return l
}

// Plain makes the entries of a plain list of card ids, as its first edit
// stores them: ids e1, e2... in list order, each card in its zone
// (zoneOf, one of the zones), positions in list order within each zone.
//
// Every plain box's zones get the same keys in the same order (each the
// key after the one before), so Plain takes them, and the entry ids, from
// tables made once; a box's entries are its cards partitioned by zone.
func Plain(cardIDs []string, zoneOf func(cardID string) Zone) (*Layout, error) {
	l := &Layout{Seq: int64(len(cardIDs))}
	if len(cardIDs) == 0 {
		return l, nil
	}
	zones := make([]Zone, len(cardIDs))
	var start [zoneCount + 1]int // where each zone's entries start, then end
	for i, id := range cardIDs {
		zones[i] = zoneOf(id)
		start[zones[i]+1]++
	}
	for z := 1; z <= zoneCount; z++ {
		start[z] += start[z-1]
	}
	l.Entries = make([]Entry, len(cardIDs))
	var placed [zoneCount]int
	for i, id := range cardIDs {
		z := zones[i]
		key, err := plainKey(placed[z])
		if err != nil {
			return nil, err
		}
		l.Entries[start[z]+placed[z]] = Entry{EntryID: plainEntryID(i), CardID: id, Zone: z, Position: key}
		placed[z]++
	}
	return l, nil
}

// zoneCount is the number of zones.
const zoneCount = 3

// plainTableSize is how many keys and entry ids Plain's tables hold: as
// many as a box holds cards.
const plainTableSize = rules.MaxBoxCards

// plainKeys are the first plainTableSize keys of a zone that is appended
// to: each position.Between the one before and the end.
var plainKeys = sync.OnceValues(func() ([]string, error) {
	keys := make([]string, plainTableSize)
	last := ""
	for i := range keys {
		key, err := position.Between(last, "")
		if err != nil {
			return nil, err
		}
		keys[i], last = key, key
	}
	return keys, nil
})

// plainKey is the key of the k-th entry (from 0) of a zone of a plain box.
func plainKey(k int) (string, error) {
	keys, err := plainKeys()
	if err != nil {
		return "", err
	}
	if k < len(keys) {
		return keys[k], nil
	}
	key := keys[len(keys)-1]
	for range k - len(keys) + 1 {
		if key, err = position.Between(key, ""); err != nil {
			return "", err
		}
	}
	return key, nil
}

// plainEntryIDs are "e1" to "e<plainTableSize>".
var plainEntryIDs = sync.OnceValue(func() []string {
	ids := make([]string, plainTableSize)
	for i := range ids {
		ids[i] = "e" + strconv.Itoa(i+1)
	}
	return ids
})

// plainEntryID is the id of the entry of the i-th card (from 0) of a
// plain box.
func plainEntryID(i int) string {
	if ids := plainEntryIDs(); i < len(ids) {
		return ids[i]
	}
	return "e" + strconv.Itoa(i+1)
}

// WithEntries is a layout of entries that keep their ids (a snapshot, or
// another box's), its sequence past the highest of them, in box order.
func WithEntries(entries []Entry) *Layout {
	l := &Layout{Entries: entries}
	for _, e := range entries {
		var n int64
		if _, err := fmt.Sscanf(e.EntryID, "e%d", &n); err == nil && n > l.Seq {
			l.Seq = n
		}
	}
	l.Sort()
	return l
}
