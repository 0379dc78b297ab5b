package layout

import (
	"slices"
	"strconv"
	"strings"

	"github.com/cardboxhq/cardbox/cardbox/position"
	"github.com/cardboxhq/cardbox/cardbox/rules"
)

// Cursors of a box with entries name a place in the box (zone and
// position), so that inserts and removals elsewhere do not shift pages:
// "b<zone>.<position>" pages the entries before that place, and
// "t<zone>.<position>" those up to it and including it. A plain box's
// cursors are indexes into its list of card ids.

// BeforeCursor is the cursor of the page that ends before e.
func BeforeCursor(e Entry) string { return "b" + strconv.Itoa(int(e.Zone)) + "." + e.Position }

// ThroughCursor is the cursor of the page that ends with e.
func ThroughCursor(e Entry) string { return "t" + strconv.Itoa(int(e.Zone)) + "." + e.Position }

// ParseCursor reads an entry cursor; ok is false for a cursor that is not
// one (a plain box's numeric cursor, or empty).
func ParseCursor(cursor string) (place Entry, through, ok bool, err error) {
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

// ParseIndexCursor reads a plain box's page cursor: the index in the box
// where the previous page started; -1 (the end of the box) when empty.
func ParseIndexCursor(cursor string) (int32, error) {
	if cursor == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(cursor, 10, 32)
	if err != nil || n < 0 {
		return 0, rules.Invalid("cursor", "%q is not a cursor returned by this API", cursor)
	}
	return int32(n), nil
}

// PageEnd is where a page that ends at cursor ends in entries (an index
// past its last entry).
func PageEnd(entries []Entry, cursor string) (int, error) {
	place, through, ok, err := ParseCursor(cursor)
	if err != nil {
		return 0, err
	}
	if !ok {
		before, err := ParseIndexCursor(cursor)
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
		case e.Before(p):
			return -1
		case p.Before(e):
			return 1
		}
		return 0
	})
	if through && end < len(entries) && !place.Before(entries[end]) {
		end++
	}
	return end, nil
}
