package projection

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// A decoded msgpack value keeps what projection needs to tell apart:
// unsigned and signed integers, strings and bins, maps with their keys in
// order. Declared lengths are checked against the bytes left before
// anything is allocated: payloads come from clients.

type (
	// kv is one map entry.
	kv struct{ key, val any }
	// mapValue is a msgpack map, entries in wire order.
	mapValue []kv
	// binValue is msgpack bin; string values are msgpack str.
	binValue []byte
	// extValue is any msgpack ext type.
	extValue struct{}
)

// maxDepth bounds nesting, so a hostile payload cannot exhaust the stack.
const maxDepth = 256

var errTooDeep = errors.New("nested too deeply")

// decode decodes one msgpack value from b; trailing bytes are ignored.
func decode(b []byte) (any, error) {
	r := bytes.NewReader(b)
	return decodeValue(valueDecoder{msgpack.NewDecoder(r), r, b}, 0)
}

// valueDecoder is a decoder and the reader it reads, whose Len is the
// bytes left: every map entry and array item takes at least one.
type valueDecoder struct {
	*msgpack.Decoder
	r *bytes.Reader
	b []byte // what r reads
}

// checkLen fails when the str, bin or ext at the reader's position declares
// more bytes than are left: the library would allocate them first.
func (d valueDecoder) checkLen(c byte) error {
	pos := len(d.b) - d.r.Len()
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
	hdr := d.b[pos+1:]
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

// preallocMax caps what a declared length preallocates; longer containers
// grow as their items actually arrive.
const preallocMax = 64

func decodeValue(d valueDecoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
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
		return decodeMap(d, depth)
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		return decodeArray(d, depth)
	case msgpcode.IsBin(c):
		b, err := d.DecodeBytes()
		return binValue(b), err
	case msgpcode.IsExt(c) || msgpcode.IsFixedExt(c):
		return extValue{}, d.Skip()
	}
	v, err := d.DecodeInterfaceLoose()
	if err != nil {
		return nil, err
	}
	if f, ok := v.(float32); ok {
		v = float64(f)
	}
	return v, nil
}

func decodeMap(d valueDecoder, depth int) (any, error) {
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, err
	}
	if left := d.r.Len(); n > left/2 {
		return nil, fmt.Errorf("map of %d entries in %d bytes", n, left)
	}
	m := make(mapValue, 0, min(n, preallocMax))
	for range n {
		k, err := decodeValue(d, depth+1)
		if err != nil {
			return nil, err
		}
		v, err := decodeValue(d, depth+1)
		if err != nil {
			return nil, err
		}
		m = append(m, kv{k, v})
	}
	return m, nil
}

func decodeArray(d valueDecoder, depth int) (any, error) {
	n, err := d.DecodeArrayLen()
	if err != nil || n < 0 {
		return nil, err
	}
	if left := d.r.Len(); n > left {
		return nil, fmt.Errorf("array of %d items in %d bytes", n, left)
	}
	a := make([]any, 0, min(n, preallocMax))
	for range n {
		v, err := decodeValue(d, depth+1)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
	}
	return a, nil
}

// unsigned returns v as a u64 when it is an integer >= 0.
func unsigned(v any) (uint64, bool) {
	switch n := v.(type) {
	case uint64:
		return n, true
	case int64:
		return uint64(n), n >= 0
	}
	return 0, false
}

// signed returns v as an i64 when it is an integer that fits one.
func signed(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case uint64:
		return int64(n), n <= math.MaxInt64
	}
	return 0, false
}
