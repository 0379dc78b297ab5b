// Package msgpackreadtest is the differential oracle of tests that read
// msgpack through msgpackread: it decodes a payload to plain Go values with
// the maintained library, github.com/vmihailenco/msgpack/v5, under the
// rules msgpackread keeps (lengths checked against the bytes left, nesting
// bounded, bytes after the first value ignored). A test compares what code
// built on msgpackread makes of a payload with what it makes of Decode's
// values.
package msgpackreadtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// The values Decode gives besides nil, bool, uint64 (an integer >= 0,
// however encoded), int64 (a negative integer), float64 (float32 widened),
// string (msgpack str) and []any (msgpack array).
type (
	// KV is one entry of a Map.
	KV struct{ Key, Val any }
	// Map is a msgpack map, its entries in wire order, duplicates kept.
	Map []KV
	// Bin is msgpack bin.
	Bin []byte
	// Ext is any msgpack ext, timestamps included.
	Ext struct {
		Type int8
		Data []byte
	}
)

// ErrTooDeep is a value nested in more arrays and maps than Decode's limit.
var ErrTooDeep = errors.New("nested too deeply")

// Decode decodes the first msgpack value of b, refusing one nested in more
// than maxDepth arrays and maps.
func Decode(b []byte, maxDepth int) (any, error) {
	r := bytes.NewReader(b)
	d := decoder{msgpack.NewDecoder(r), r, b, maxDepth}
	return d.value(0)
}

// decoder is a Decoder and the reader it reads, whose Len is the bytes
// left: every map entry and array item takes at least one.
type decoder struct {
	*msgpack.Decoder
	r        *bytes.Reader
	b        []byte // what r reads
	maxDepth int
}

// preallocMax caps what a declared length preallocates; longer containers
// grow as their items actually arrive.
const preallocMax = 64

func (d decoder) value(depth int) (any, error) {
	if depth > d.maxDepth {
		return nil, ErrTooDeep
	}
	c, err := d.PeekCode()
	if err != nil {
		return nil, err
	}
	if err := d.checkLen(c); err != nil {
		return nil, err
	}
	switch {
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return d.mapValue(depth)
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		return d.array(depth)
	case msgpcode.IsBin(c):
		b, err := d.DecodeBytes()
		return Bin(b), err
	case msgpcode.IsExt(c) || msgpcode.IsFixedExt(c):
		return d.ext()
	}
	return d.scalar()
}

// checkLen fails when the str, bin or ext at the reader's position declares
// more bytes than are left: the library would allocate them first.
func (d decoder) checkLen(c byte) error {
	var size int // bytes of the length field
	switch c {
	case msgpcode.Str8, msgpcode.Bin8, msgpcode.Ext8:
		size = 1
	case msgpcode.Str16, msgpcode.Bin16, msgpcode.Ext16:
		size = 2
	case msgpcode.Str32, msgpcode.Bin32, msgpcode.Ext32:
		size = 4
	default:
		return nil
	}
	hdr := d.b[len(d.b)-d.r.Len()+1:]
	if len(hdr) < size {
		return io.ErrUnexpectedEOF
	}
	var n uint64
	for _, x := range hdr[:size] {
		n = n<<8 | uint64(x)
	}
	if n > uint64(len(hdr)-size) {
		return fmt.Errorf("value of %d bytes in %d", n, len(hdr)-size)
	}
	return nil
}

func (d decoder) mapValue(depth int) (any, error) {
	n, err := d.DecodeMapLen()
	if err != nil {
		return nil, err
	}
	if left := d.r.Len(); n > left/2 {
		return nil, fmt.Errorf("map of %d entries in %d bytes", n, left)
	}
	m := make(Map, 0, min(n, preallocMax))
	for range n {
		k, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m = append(m, KV{k, v})
	}
	return m, nil
}

func (d decoder) array(depth int) (any, error) {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if left := d.r.Len(); n > left {
		return nil, fmt.Errorf("array of %d items in %d bytes", n, left)
	}
	a := make([]any, 0, min(n, preallocMax))
	for range n {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
	}
	return a, nil
}

func (d decoder) ext() (any, error) {
	typ, n, err := d.DecodeExtHeader()
	if err != nil {
		return nil, err
	}
	if n > d.r.Len() {
		return nil, io.ErrUnexpectedEOF
	}
	data := make([]byte, n)
	return Ext{typ, data}, d.ReadFull(data)
}

// scalar decodes nil, bool, an integer, a float or a str.
func (d decoder) scalar() (any, error) {
	v, err := d.DecodeInterfaceLoose()
	switch x := v.(type) {
	case int64:
		if x >= 0 {
			return uint64(x), err
		}
	case float32:
		return float64(x), err
	}
	return v, err
}
