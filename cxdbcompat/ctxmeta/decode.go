package ctxmeta

import (
	"strconv"

	"github.com/cardboxhq/cardbox/cxdbcompat/msgpackread"
)

// reader reads metadata fields through the shared bounded reader. Each
// helper is given the head of a value, read at depth, and reads the rest of
// it: a value of another type than the field's is skipped and gives nil.
type reader struct{ msgpackread.Reader }

type head = msgpackread.Head

// eachEntry calls fn for every entry of the map h whose key is a tag, with
// the head of the entry's value; fn must read that value, at depth+1. A
// value that is not a map is skipped and reported by isMap.
func (r *reader) eachEntry(h head, depth int, fn func(tag uint64, v head, depth int) error) (isMap bool, err error) {
	return r.eachPair(h, depth, func(k, v head, d int) error {
		tag, ok := r.tag(k)
		if !ok {
			return r.Skip(v, d)
		}
		return fn(tag, v, d)
	})
}

// eachPair calls fn with the heads of the key and the value of every entry
// of the map h; a key is read whole, fn must read the value, at depth+1.
// A value that is not a map is skipped and reported by isMap.
func (r *reader) eachPair(h head, depth int, fn func(k, v head, depth int) error) (isMap bool, err error) {
	if h.Kind != msgpackread.Map {
		return false, r.Skip(h, depth)
	}
	for range h.N {
		k, err := r.Head(depth + 1)
		if err == nil {
			err = r.Skip(k, depth+1)
		}
		if err != nil {
			return true, err
		}
		v, err := r.Head(depth + 1)
		if err == nil {
			err = fn(k, v, depth+1)
		}
		if err != nil {
			return true, err
		}
	}
	return true, nil
}

// eachItem calls fn with the head of every item of the array h; fn must
// read the item, at depth+1. A value that is not an array is skipped and
// reported by isArray.
func (r *reader) eachItem(h head, depth int, fn func(v head, depth int) error) (isArray bool, err error) {
	if h.Kind != msgpackread.Array {
		return false, r.Skip(h, depth)
	}
	for range h.N {
		v, err := r.Head(depth + 1)
		if err == nil {
			err = fn(v, depth+1)
		}
		if err != nil {
			return true, err
		}
	}
	return true, nil
}

// str is a str value cleaned by CleanText.
func (r *reader) str(h head, depth int) (*string, error) {
	if h.Kind != msgpackread.Str {
		return nil, r.Skip(h, depth)
	}
	s := CleanText(string(r.Bytes(h)))
	return &s, nil
}

// u64 is an integer value >= 0.
func (r *reader) u64(h head, depth int) (*uint64, error) {
	if h.Kind != msgpackread.Uint {
		return nil, r.Skip(h, depth)
	}
	return &h.N, nil
}

// i64 is an integer value that fits an int64.
func (r *reader) i64(h head, depth int) (*int64, error) {
	n, ok := h.Int64()
	if !ok {
		return nil, r.Skip(h, depth)
	}
	return &n, nil
}

// tag reports whether the key k, read whole, names a tag: an integer >= 0
// or a str holding a decimal uint64.
func (r *reader) tag(k head) (uint64, bool) {
	switch k.Kind {
	case msgpackread.Uint:
		return k.N, true
	case msgpackread.Str:
		tag, err := strconv.ParseUint(string(r.Bytes(k)), 10, 64)
		return tag, err == nil
	}
	return 0, false
}
