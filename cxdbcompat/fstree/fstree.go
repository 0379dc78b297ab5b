// Package fstree decodes the tree objects of CXDB filesystem snapshots:
// a directory is one blob, a msgpack array of entries {1: name, 2: kind,
// 3: mode, 4: size, 5: hash}, keyed by integers or digit strings (the
// official Go client writes digit strings). It parses as tolerantly as the
// reference server (spec section 7.1) and knows nothing of storage.
package fstree

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cardboxhq/cardbox/cxdbcompat/msgpackread"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Kinds of entries. Values above KindSymlink read as files, as in the
// reference server.
const (
	KindFile    = 0
	KindDir     = 1
	KindSymlink = 2
)

// Entry is one entry of a directory.
type Entry struct {
	Name string
	Kind int
	Mode uint32
	Size uint64
	// Hash is the BLAKE3-256 of the file's content, the child tree object
	// or the symlink's target; HashOK is false when the entry's hash is
	// not 32 bytes (the entry cannot be followed).
	Hash   [32]byte
	HashOK bool
}

// ErrNotTree is returned for a blob that is not a tree object.
var ErrNotTree = errors.New("not an fs tree object")

// Decode decodes a tree object. msgpack nil, which the official Go client
// writes for an empty directory, is an empty listing. It reads through
// msgpackread, so declared lengths are checked against the bytes there are
// before anything is allocated for them: tree objects come from clients.
// Bytes after the array are ignored.
func Decode(b []byte) ([]Entry, error) {
	r := msgpackread.NewReader(b, maxDepth)
	h, err := r.Head(0)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrNotTree, err)
	case h.Kind == msgpackread.Nil:
		return nil, nil // nil: an empty directory
	case h.Kind != msgpackread.Array:
		return nil, fmt.Errorf("%w: a %s, not an array", ErrNotTree, h.Kind)
	}
	entries := make([]Entry, 0, h.N)
	for i := range h.N {
		e, err := decodeEntry(&r)
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %w", ErrNotTree, i, err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// maxDepth bounds the nesting of what an entry holds; no tree object nests
// at all, but a hostile one must not exhaust the stack.
const maxDepth = 64

// decodeEntry decodes an entry map, at depth 1; msgpack nil is an entry
// with nothing set. Keys are integers >= 0 or their digit strings; of two
// keys naming the same field the later wins, whatever its value.
func decodeEntry(r *msgpackread.Reader) (Entry, error) {
	h, err := r.Head(1)
	switch {
	case err != nil:
		return Entry{}, err
	case h.Kind == msgpackread.Nil:
		return Entry{}, nil
	case h.Kind != msgpackread.Map:
		return Entry{}, fmt.Errorf("a %s, not a map", h.Kind)
	}
	var e Entry
	for range h.N {
		k, err := scalar(r)
		if err != nil {
			return Entry{}, err
		}
		v, err := scalar(r)
		if err != nil {
			return Entry{}, err
		}
		e.set(fieldKey(r, k), r.Bytes(v), v)
	}
	return e, nil
}

// scalar reads an entry's key or value, at depth 2. An array or map, which
// no tree object has, is skipped: no key or field takes its head. An ext
// fails unless it is a msgpack timestamp (type -1, 4, 8 or 12 bytes), as
// the library's decoder, which this replaced, failed on any other.
func scalar(r *msgpackread.Reader) (msgpackread.Head, error) {
	h, err := r.Head(2)
	if err != nil {
		return h, err
	}
	if h.Kind == msgpackread.Ext && (h.ExtType != -1 || h.N != 4 && h.N != 8 && h.N != 12) {
		return h, fmt.Errorf("an ext of type %d and %d bytes", h.ExtType, h.N)
	}
	return h, r.Skip(h, 2)
}

// fieldKey is the field a key names, 1 to 5, or 0 for none: an integer
// >= 0, or a str or bin that is its decimal digits exactly ("01" is none).
func fieldKey(r *msgpackread.Reader, k msgpackread.Head) uint64 {
	switch k.Kind {
	case msgpackread.Uint:
		return k.N
	case msgpackread.Str, msgpackread.Bin:
		if s := r.Bytes(k); len(s) == 1 && s[0] >= '1' && s[0] <= '5' {
			return uint64(s[0] - '0')
		}
	}
	return 0
}

// set sets the field named key to the value v, whose bytes are b if it is
// a str or bin; a value of the wrong type unsets the field. A negative
// integer is taken as its two's complement bits, as it always was.
func (e *Entry) set(key uint64, b []byte, v msgpackread.Head) {
	n := v.N
	if v.Kind != msgpackread.Uint && v.Kind != msgpackread.Neg {
		n = 0
	}
	isBytes := v.Kind == msgpackread.Str || v.Kind == msgpackread.Bin
	switch key {
	case 1:
		e.Name = ""
		if isBytes {
			e.Name = string(b)
		}
	case 2:
		e.Kind = KindFile // also for values above KindSymlink
		if n <= KindSymlink {
			e.Kind = int(n)
		}
	case 3:
		e.Mode = uint32(n)
	case 4:
		e.Size = n
	case 5:
		e.Hash, e.HashOK = [32]byte{}, isBytes && len(b) == len(e.Hash)
		if e.HashOK {
			copy(e.Hash[:], b)
		}
	}
}

// Encode writes a tree object as the official Go client does: an array of
// maps with digit-string keys "1".."5" in order, kind as uint8, mode as
// uint32, size as uint64, hash as bin 32; msgpack nil for no entries. The
// caller sorts the entries by name.
func Encode(entries []Entry) []byte {
	if len(entries) == 0 {
		return []byte{msgpcode.Nil}
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	_ = enc.EncodeArrayLen(len(entries))
	for _, e := range entries {
		_ = enc.EncodeMapLen(5)
		_ = enc.EncodeString("1")
		_ = enc.EncodeString(e.Name)
		_ = enc.EncodeString("2")
		_ = enc.EncodeUint8(uint8(e.Kind))
		_ = enc.EncodeString("3")
		_ = enc.EncodeUint32(e.Mode)
		_ = enc.EncodeString("4")
		_ = enc.EncodeUint64(e.Size)
		_ = enc.EncodeString("5")
		_ = enc.EncodeBytes(e.Hash[:])
	}
	return buf.Bytes()
}
