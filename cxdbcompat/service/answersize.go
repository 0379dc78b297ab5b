package service

import (
	"encoding/json"
	"errors"

	"github.com/cardboxhq/cardbox/internal/appendjson"
)

// Context lists and searches are bounded in bytes as turn pages are: their
// entries' JSON is at most MaxPageBytes (a context's title, labels and
// provenance come from its first turn and have no length limit of their
// own). Entries are sized as they are built, from the lengths of their
// strings as encoding/json writes them plus a fixed overhead, never less
// than their JSON.

// ErrAnswerFull, returned by a list's or search's Reserve, says the answer
// may not grow by the entry asked for (a memory budget could never hold
// it): the answer stops before that entry as it does at MaxPageBytes, or,
// when it is the first, the list or search fails with it.
var ErrAnswerFull = errors.New("the answer may not grow")

// answerBytes is the size of a list's or search's entries so far.
type answerBytes struct {
	size    int
	reserve func(n int64) error // may be nil
}

// add reports whether an entry of n bytes joins the answer: not when it
// would take the answer past MaxPageBytes or reserve refuses it with
// ErrAnswerFull, unless it is the first entry, which is always answered
// or fails.
func (a *answerBytes) add(first bool, n int) (bool, error) {
	if !first && a.size+n > MaxPageBytes {
		return false, nil
	}
	if a.reserve != nil {
		if err := a.reserve(int64(n)); err != nil {
			if !first && errors.Is(err, ErrAnswerFull) {
				return false, nil
			}
			return false, err
		}
	}
	a.size += n
	return true, nil
}

// entryOverhead is at least an entry's JSON without its strings of
// unbounded length: its keys, ids, numbers, booleans and separators.
const entryOverhead = 384

// size is at least e's JSON and the comma before it.
func (e *ContextEntry) size() int {
	n := entryOverhead + appendjson.StringLen(e.ClientTag) + appendjson.StringLen(e.Title)
	for _, l := range e.Labels {
		n += appendjson.StringLen(l) + 1
	}
	if e.Provenance != nil {
		if b, err := json.Marshal(e.Provenance); err == nil {
			n += len(b)
		} else {
			n += MaxPageBytes // not answerable alongside others
		}
	}
	return n
}

// size is at least e's JSON and the comma before it.
func (e *SearchEntry) size() int {
	return entryOverhead + appendjson.StringLen(e.ClientTag) + appendjson.StringLen(e.Title)
}
