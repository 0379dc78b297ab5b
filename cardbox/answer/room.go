// Package answer holds bounded reads to what a memory budget gives their
// answers: the Room a read asks before it loads an entry, and the bounds
// on the JSON size of cards, ids and boxes that it asks for, measured
// before anything is loaded.
package answer

import (
	"errors"
	"strings"

	"github.com/cardboxhq/cardbox/cardbox/rules"
)

// ErrAnswerFull, from a Room, says the answer may not grow by the entry
// asked for: the read ends before it, or fails with the error when the
// entry is the answer's first.
var ErrAnswerFull = errors.New("the answer may not grow")

// Room is asked, in answer order and before the entry is loaded, for n
// more bytes of answer: at least the JSON of the entry (a card, or a box
// with its hydrated cards) and a separator. An error wrapping
// ErrAnswerFull ends the answer before the entry; any other error, or
// any error for the answer's first entry, fails the read.
type Room func(n int64) error

// ErrStop is Ask's: the answer ends before the entry.
var ErrStop = errors.New("answer ends here")

// Ask asks room for an entry of n bytes: ErrStop when it has none and
// the entry is not the answer's first.
func Ask(room Room, n int64, first bool) error {
	err := room(n)
	if err != nil && !first && errors.Is(err, ErrAnswerFull) {
		return ErrStop
	}
	return err
}

// createdBoxIDLength is the length of the ids CreateBox gives (UUIDs).
const createdBoxIDLength = 36

// BoxInputJSONSize is at least the JSON of the box that saving card ids,
// parent ids and metadata as boxID answers ("" for CreateBox's new id), measured as LiveBoxSizes
// measures a stored box, so that the answer can be charged before the
// save. Metadata is measured as sent: Postgres may write a number given
// with an exponent longer, and an answer past the size is charged once
// rendered. An input the save refuses for its size (too many ids, an id
// or metadata too long) measures 0: it is never answered.
func BoxInputJSONSize(project, boxID string, cardIDs, parentIDs []string, metadata []byte) int64 {
	meta := CompactJSONSize(metadata)
	if len(cardIDs) > rules.MaxBoxCards || len(parentIDs) > rules.MaxBoxParents || meta > rules.MaxMetadataBytes {
		return 0
	}
	if boxID == "" {
		boxID = strings.Repeat("0", createdBoxIDLength)
	}
	n, ok := IDsJSONSize(cardIDs)
	if !ok {
		return 0
	}
	parents, ok := IDsJSONSize(parentIDs)
	if !ok {
		return 0
	}
	return 512 + int64(JSONStringBound(boxID)+JSONStringBound(project)) + n + parents + meta
}

// AppendedBoxJSONSize is at least the JSON of a box of size bytes (as
// BoxJSONSize measures it) once cardIDs are appended; 0 when the append
// is refused for its ids' sizes.
func AppendedBoxJSONSize(size int64, cardIDs []string) int64 {
	if len(cardIDs) > rules.MaxBoxCards {
		return 0
	}
	n, ok := IDsJSONSize(cardIDs)
	if !ok {
		return 0
	}
	return size + n
}
