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
	"strconv"

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
// writes for an empty directory, is an empty listing. Declared lengths are
// checked against the bytes there are before anything is allocated for
// them: tree objects come from clients.
func Decode(b []byte) ([]Entry, error) {
	d := msgpack.NewDecoder(bytes.NewReader(b))
	n, err := d.DecodeArrayLen()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrNotTree, err)
	case n < 0:
		return nil, nil // nil: an empty directory
	case n > len(b):
		return nil, fmt.Errorf("%w: %d entries declared in %d bytes", ErrNotTree, n, len(b))
	}
	entries := make([]Entry, 0, n)
	for i := range n {
		m, err := decodeEntry(d, len(b))
		if err != nil {
			return nil, fmt.Errorf("%w: entry %d: %w", ErrNotTree, i, err)
		}
		entries = append(entries, entryOf(m))
	}
	return entries, nil
}

// decodeEntry decodes an entry map, keyed by digit strings whether its
// keys were integers or strings. Only scalar keys and values are decoded;
// others, which no tree object has, are skipped.
func decodeEntry(d *msgpack.Decoder, limit int) (map[string]any, error) {
	n, err := d.DecodeMapLen()
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%d keys declared in %d bytes", n, limit)
	}
	m := make(map[string]any, max(n, 0))
	for range n {
		k, err := scalar(d)
		if err != nil {
			return nil, err
		}
		v, err := scalar(d)
		if err != nil {
			return nil, err
		}
		if key, ok := k.(string); ok {
			m[key] = v
		} else if u, ok := toUint(k); ok {
			m[strconv.FormatUint(u, 10)] = v
		}
	}
	return m, nil
}

// scalar decodes the next value if it is not an array or a map, and skips
// it (returning nil) if it is.
func scalar(d *msgpack.Decoder) (any, error) {
	c, err := d.PeekCode()
	if err != nil {
		return nil, err
	}
	if msgpcode.IsFixedArray(c) || msgpcode.IsFixedMap(c) ||
		c == msgpcode.Array16 || c == msgpcode.Array32 || c == msgpcode.Map16 || c == msgpcode.Map32 {
		return nil, d.Skip()
	}
	v, err := d.DecodeInterfaceLoose()
	if b, ok := v.([]byte); ok {
		v = bytes.Clone(b) // the decoder reuses its buffer
	}
	return v, err
}

func entryOf(m map[string]any) Entry {
	var e Entry
	e.Name, _ = m["1"].(string)
	kind, _ := toUint(m["2"])
	e.Kind = int(min(kind, KindSymlink+1))
	if e.Kind > KindSymlink {
		e.Kind = KindFile
	}
	mode, _ := toUint(m["3"])
	e.Mode = uint32(mode)
	e.Size, _ = toUint(m["4"])
	var h []byte
	switch v := m["5"].(type) {
	case []byte:
		h = v
	case string: // the decoder may hand a bin as a string
		h = []byte(v)
	}
	if len(h) == len(e.Hash) {
		copy(e.Hash[:], h)
		e.HashOK = true
	}
	return e
}

// toUint reads any msgpack integer that is not negative.
func toUint(v any) (uint64, bool) {
	switch n := v.(type) {
	case uint64:
		return n, true
	case uint32:
		return uint64(n), true
	case uint16:
		return uint64(n), true
	case uint8:
		return uint64(n), true
	case int64:
		return uint64(n), n >= 0
	case int32:
		return uint64(n), n >= 0
	case int16:
		return uint64(n), n >= 0
	case int8:
		return uint64(n), n >= 0
	}
	return 0, false
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
