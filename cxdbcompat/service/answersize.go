package service

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
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

// jsonStringLen is the length of s as encoding/json writes it, quotes
// included, escaping HTML characters as echo's JSON answers do.
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
				n += 2
			case b < 0x20 || b == '<' || b == '>' || b == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// size is at least e's JSON and the comma before it.
func (e *ContextEntry) size() int {
	n := entryOverhead + jsonStringLen(e.ClientTag) + jsonStringLen(e.Title)
	for _, l := range e.Labels {
		n += jsonStringLen(l) + 1
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
	return entryOverhead + jsonStringLen(e.ClientTag) + jsonStringLen(e.Title)
}
