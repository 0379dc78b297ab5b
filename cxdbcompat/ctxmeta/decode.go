package ctxmeta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

var (
	errTooDeep  = errors.New("ctxmeta: msgpack nesting too deep")
	errTooLong  = errors.New("ctxmeta: msgpack length exceeds the payload")
	errBadValue = errors.New("ctxmeta: malformed msgpack value")
)

// reader walks one msgpack value with a msgpack.Decoder reading straight
// from the payload, so that the bytes left are always known.
type reader struct {
	data []byte
	br   *bytes.Reader
	dec  *msgpack.Decoder
}

func newReader(data []byte) *reader {
	br := bytes.NewReader(data)
	return &reader{data: data, br: br, dec: msgpack.NewDecoder(br)}
}

// rest returns the bytes not yet read.
func (r *reader) rest() []byte { return r.data[len(r.data)-r.br.Len():] }

// code peeks at the type code of the next value.
func (r *reader) code() (byte, error) { return r.dec.PeekCode() }

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isStr(c byte) bool {
	return msgpcode.IsFixedString(c) || c == msgpcode.Str8 || c == msgpcode.Str16 || c == msgpcode.Str32
}

// eachEntry reads a map value at depth, calling fn with the tag of every
// entry whose key is a tag; fn must consume the entry's value, read at
// depth+1. A value that is not a map is skipped and reported by isMap.
func (r *reader) eachEntry(depth int, fn func(tag uint64, depth int) error) (isMap bool, err error) {
	return r.eachPair(depth, func(d int) error {
		tag, ok, err := r.key(d)
		if err != nil {
			return err
		}
		if !ok {
			return r.skip(d)
		}
		return fn(tag, d)
	})
}

// eachPair reads a map value at depth, calling fn once per entry; fn must
// consume the key and the value, read at depth+1.
func (r *reader) eachPair(depth int, fn func(depth int) error) (bool, error) {
	return r.container(depth, isMap, fn)
}

// eachItem reads an array value at depth, calling fn once per item; fn must
// consume the item, read at depth+1.
func (r *reader) eachItem(depth int, fn func(depth int) error) (bool, error) {
	return r.container(depth, isArray, fn)
}

// container reads a map or array (as told by want) of n entries, calling fn
// n times. Other values are skipped.
func (r *reader) container(depth int, want func(byte) bool, fn func(int) error) (bool, error) {
	c, err := r.code()
	if err != nil {
		return false, err
	}
	if !want(c) {
		return false, r.skip(depth)
	}
	if depth > MaxDepth {
		return true, errTooDeep
	}
	n, err := r.length(c)
	if err != nil {
		return true, err
	}
	for i := 0; i < n; i++ {
		if err := fn(depth + 1); err != nil {
			return true, err
		}
	}
	return true, nil
}

// length reads the header of a map or array with code c and checks its
// element count against the bytes left.
func (r *reader) length(c byte) (int, error) {
	var n int
	var err error
	minSize := 1
	if isMap(c) {
		n, err = r.dec.DecodeMapLen()
		minSize = 2
	} else {
		n, err = r.dec.DecodeArrayLen()
	}
	if err != nil {
		return 0, err
	}
	if n < 0 || n > r.br.Len()/minSize {
		return 0, errTooLong
	}
	return n, nil
}

// skip consumes the next value at depth.
func (r *reader) skip(depth int) error {
	c, err := r.code()
	if err != nil {
		return err
	}
	if isMap(c) || isArray(c) {
		if depth > MaxDepth {
			return errTooDeep
		}
		n, err := r.length(c)
		if isMap(c) {
			n *= 2
		}
		for i := 0; i < n && err == nil; i++ {
			err = r.skip(depth + 1)
		}
		return err
	}
	if err := r.checkBody(); err != nil {
		return err
	}
	return r.dec.Skip()
}

// checkBody checks that the body declared by a str, bin or ext header at the
// read position fits in the bytes left; other values pass.
func (r *reader) checkBody() error {
	hdr, n, ok := bodyLen(r.rest())
	if !ok {
		return errBadValue
	}
	if n > uint64(r.br.Len()-hdr) {
		return errTooLong
	}
	return nil
}

// fixedBody maps codes with an implicit body size to (header size, size).
var fixedBody = map[byte][2]int{
	msgpcode.FixExt1: {2, 1}, msgpcode.FixExt2: {2, 2}, msgpcode.FixExt4: {2, 4},
	msgpcode.FixExt8: {2, 8}, msgpcode.FixExt16: {2, 16},
}

// sizedBody maps codes followed by a big-endian length to the width of that
// length and the bytes (ext type) between it and the body.
var sizedBody = map[byte][2]int{
	msgpcode.Str8: {1, 0}, msgpcode.Str16: {2, 0}, msgpcode.Str32: {4, 0},
	msgpcode.Bin8: {1, 0}, msgpcode.Bin16: {2, 0}, msgpcode.Bin32: {4, 0},
	msgpcode.Ext8: {1, 1}, msgpcode.Ext16: {2, 1}, msgpcode.Ext32: {4, 1},
}

// bodyLen returns the header size and declared body size of the value at
// the start of b (0, 0 for values without a body); ok is false when the
// header itself is cut short.
func bodyLen(b []byte) (hdr int, n uint64, ok bool) {
	c := b[0]
	if msgpcode.IsFixedString(c) {
		return 1, uint64(c & msgpcode.FixedStrMask), true
	}
	if f, found := fixedBody[c]; found {
		return f[0], uint64(f[1]), len(b) >= f[0]
	}
	s, found := sizedBody[c]
	if !found {
		return 0, 0, true
	}
	hdr = 1 + s[0] + s[1]
	if len(b) < hdr {
		return 0, 0, false
	}
	var buf [8]byte
	copy(buf[8-s[0]:], b[1:1+s[0]])
	return hdr, binary.BigEndian.Uint64(buf[:]), true
}

// str reads a str value at depth, cleaned by CleanText; other values are
// skipped and give nil.
func (r *reader) str(depth int) (*string, error) {
	c, err := r.code()
	if err != nil {
		return nil, err
	}
	if !isStr(c) {
		return nil, r.skip(depth)
	}
	if err := r.checkBody(); err != nil {
		return nil, err
	}
	s, err := r.dec.DecodeString()
	if err != nil {
		return nil, err
	}
	s = CleanText(s)
	return &s, nil
}

// integer reads an integer value at depth as its magnitude v and sign neg
// (v holds the two's complement bits when neg); other values are skipped
// and give isInt false.
func (r *reader) integer(depth int) (v uint64, neg, isInt bool, err error) {
	c, err := r.code()
	if err != nil {
		return 0, false, false, err
	}
	switch {
	case msgpcode.IsFixedNum(c) && c <= msgpcode.PosFixedNumHigh,
		c >= msgpcode.Uint8 && c <= msgpcode.Uint64:
		v, err = r.dec.DecodeUint64()
		return v, false, err == nil, err
	case msgpcode.IsFixedNum(c), c >= msgpcode.Int8 && c <= msgpcode.Int64:
		i, err := r.dec.DecodeInt64()
		return uint64(i), i < 0, err == nil, err
	}
	return 0, false, false, r.skip(depth)
}

// u64 reads a non-negative integer value at depth; others give nil.
func (r *reader) u64(depth int) (*uint64, error) {
	v, neg, ok, err := r.integer(depth)
	if !ok || neg {
		return nil, err
	}
	return &v, nil
}

// i64 reads an integer value fitting int64 at depth; others give nil.
func (r *reader) i64(depth int) (*int64, error) {
	v, neg, ok, err := r.integer(depth)
	if !ok || (!neg && v > math.MaxInt64) {
		return nil, err
	}
	i := int64(v)
	return &i, nil
}

// key reads a map key at depth and reports whether it names a tag: a
// non-negative integer or a str holding a decimal uint64. Keys that are
// not tags are skipped.
func (r *reader) key(depth int) (tag uint64, ok bool, err error) {
	c, err := r.code()
	if err != nil {
		return 0, false, err
	}
	if !isStr(c) {
		v, neg, isInt, err := r.integer(depth)
		return v, isInt && !neg, err
	}
	s, err := r.str(depth)
	if err != nil {
		return 0, false, err
	}
	tag, perr := strconv.ParseUint(*s, 10, 64)
	return tag, perr == nil, nil
}
