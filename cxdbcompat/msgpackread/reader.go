// Package msgpackread reads msgpack values from bytes that come from
// clients, one header at a time, without decoding them to Go values. It is
// the one msgpack reader of the repository: the typed projection of turns,
// the context metadata of first turns and the fs tree objects all read
// through it.
//
// Payloads are untrusted, so a Reader never believes a header: every length
// a header declares is checked against the bytes left before anything is
// read or allocated (a str, bin or ext must fit; an array of n items needs
// at least n bytes and a map of n entries 2n, as every value takes one),
// and a value nested in more arrays and maps than the reader's limit is
// refused. A hostile payload can make a reader fail, never allocate or
// recurse beyond what its length allows.
//
// A caller reads a value's Head and then, for an array or a map, reads its
// items with Head one level deeper, or skips them with Skip. The bytes of a
// str, bin or ext are a slice of the payload.
//
// It reads the bytes itself, naming the type codes with msgpcode, rather
// than through the msgpack library's Decoder: projecting turns is the hot
// path, and there a Decoder-based reader cost 14 to 21% more time per turn
// while every check on lengths and depth still had to be written here. The
// library is the oracle its tests compare it with (msgpackreadtest).
package msgpackread

import (
	"errors"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Kind is the type of a msgpack value, as far as readers tell apart.
type Kind uint8

// The kinds of values; Head.N means what each says.
const (
	Nil   Kind = iota
	Bool       // N is 1 for true, 0 for false
	Uint       // an integer >= 0, whatever its encoding, in N
	Neg        // a negative integer, whose int64 bits are N
	Float      // float64 bits in N; a float32 is widened
	Str        // N bytes, read with Reader.Bytes
	Bin        // N bytes, read with Reader.Bytes
	Array      // N items follow
	Map        // N entries follow, each a key then a value
	Ext        // N bytes of data, read with Reader.Bytes, of type Head.ExtType
)

// Head is a value's header: a whole scalar, the place of a str's, bin's or
// ext's bytes, or the length of an array or map whose items follow.
type Head struct {
	Kind Kind
	// ExtType is an ext's type; 0 for other kinds.
	ExtType int8
	// N is the value, its bits or its length, as its Kind says.
	N uint64
	// off is where a str's, bin's or ext's bytes start in the payload.
	off int
}

// Int64 is an integer that fits an int64; ok is false for anything else.
func (h Head) Int64() (n int64, ok bool) {
	return int64(h.N), h.Kind == Neg || h.Kind == Uint && h.N <= math.MaxInt64
}

// Float64 is a float's value; 0 for other kinds.
func (h Head) Float64() float64 {
	if h.Kind != Float {
		return 0
	}
	return math.Float64frombits(h.N)
}

// kindNames are the names of the Kinds, by value.
var kindNames = [...]string{"nil", "bool", "uint", "negative int", "float", "str", "bin", "array", "map", "ext"}

// String names k for error messages.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Errors of a Reader. The texts are what clients see in error responses.
var (
	// ErrTooDeep is a value nested deeper than the reader's limit.
	ErrTooDeep = errors.New("nested too deeply")
	// ErrShort is a payload that ends inside a value, or a length that
	// declares more than the bytes left.
	ErrShort = errors.New("unexpected end of payload, or a length beyond it")
	// ErrCode is a type code msgpack does not define (0xc1).
	ErrCode = errors.New("unknown code")
)

// Reader reads msgpack values from a payload. The zero Reader reads an
// empty payload.
type Reader struct {
	b        []byte
	i        int
	maxDepth int
}

// NewReader reads b, refusing a value nested in more than maxDepth arrays
// and maps: depth bounds the recursion of callers and of Skip, so that a
// hostile payload cannot exhaust the stack.
func NewReader(b []byte, maxDepth int) Reader {
	return Reader{b: b, maxDepth: maxDepth}
}

// Len is the number of bytes not yet read; a caller that reads one value
// and wants nothing after it checks that Len is 0.
func (r *Reader) Len() int { return len(r.b) - r.i }

// Head reads the header of the next value, which is nested in depth arrays
// and maps (the first value is at depth 0). A str's, bin's or ext's bytes
// are read too; an array's or map's items are left to read.
func (r *Reader) Head(depth int) (Head, error) {
	if depth > r.maxDepth || r.i >= len(r.b) {
		return Head{}, r.headErr(depth)
	}
	c := r.b[r.i]
	r.i++
	switch { // the fixed formats, most values, first
	case c <= msgpcode.PosFixedNumHigh:
		return Head{Kind: Uint, N: uint64(c)}, nil
	case msgpcode.IsFixedString(c):
		n := int(c & msgpcode.FixedStrMask)
		if n > len(r.b)-r.i {
			return Head{}, ErrShort
		}
		r.i += n
		return Head{Kind: Str, N: uint64(n), off: r.i - n}, nil
	case c >= msgpcode.NegFixedNumLow:
		return Head{Kind: Neg, N: uint64(int64(int8(c)))}, nil
	case msgpcode.IsFixedMap(c):
		return r.sized(Map, uint64(c&msgpcode.FixedMapMask))
	case msgpcode.IsFixedArray(c):
		return r.sized(Array, uint64(c&msgpcode.FixedArrayMask))
	}
	return r.headC(c)
}

func (r *Reader) headErr(depth int) error {
	if depth > r.maxDepth {
		return ErrTooDeep
	}
	return ErrShort
}

// headC reads the rest of a value whose code is in 0xc0..0xdf; the width
// of each format's length or value doubles from one code to the next.
func (r *Reader) headC(c byte) (Head, error) {
	switch {
	case c == msgpcode.Nil:
		return Head{Kind: Nil}, nil
	case c == msgpcode.False || c == msgpcode.True:
		return Head{Kind: Bool, N: uint64(c - msgpcode.False)}, nil
	case msgpcode.IsBin(c):
		return r.lengthThen(Bin, 1<<(c-msgpcode.Bin8))
	case c >= msgpcode.Ext8 && c <= msgpcode.Ext32:
		return r.lengthThen(Ext, 1<<(c-msgpcode.Ext8))
	case c == msgpcode.Float || c == msgpcode.Double:
		return r.float(c == msgpcode.Double)
	case c >= msgpcode.Uint8 && c <= msgpcode.Uint64:
		n, err := r.uint(1 << (c - msgpcode.Uint8))
		return Head{Kind: Uint, N: n}, err
	case c >= msgpcode.Int8 && c <= msgpcode.Int64:
		return r.int(1 << (c - msgpcode.Int8))
	case msgpcode.IsFixedExt(c):
		return r.sized(Ext, 1<<(c-msgpcode.FixExt1))
	case c >= msgpcode.Str8 && c <= msgpcode.Str32:
		return r.lengthThen(Str, 1<<(c-msgpcode.Str8))
	case c == msgpcode.Array16 || c == msgpcode.Array32:
		return r.lengthThen(Array, 2<<(c-msgpcode.Array16))
	case c == msgpcode.Map16 || c == msgpcode.Map32:
		return r.lengthThen(Map, 2<<(c-msgpcode.Map16))
	}
	return Head{}, fmt.Errorf("%w %#x", ErrCode, c)
}

// uint reads a big-endian unsigned integer of width bytes.
func (r *Reader) uint(width int) (uint64, error) {
	if width > len(r.b)-r.i {
		return 0, ErrShort
	}
	var n uint64
	for _, x := range r.b[r.i : r.i+width] {
		n = n<<8 | uint64(x)
	}
	r.i += width
	return n, nil
}

// int reads a big-endian signed integer of width bytes; one >= 0 is a
// Uint, as callers care about the value, not the encoding.
func (r *Reader) int(width int) (Head, error) {
	u, err := r.uint(width)
	shift := 64 - 8*width
	n := int64(u<<shift) >> shift
	if n < 0 {
		return Head{Kind: Neg, N: uint64(n)}, err
	}
	return Head{Kind: Uint, N: uint64(n)}, err
}

func (r *Reader) float(double bool) (Head, error) {
	if !double {
		u, err := r.uint(4)
		f := float64(math.Float32frombits(uint32(u)))
		return Head{Kind: Float, N: math.Float64bits(f)}, err
	}
	u, err := r.uint(8)
	return Head{Kind: Float, N: u}, err
}

// lengthThen reads a length of width bytes, then what it sizes.
func (r *Reader) lengthThen(k Kind, width int) (Head, error) {
	n, err := r.uint(width)
	if err != nil {
		return Head{}, err
	}
	return r.sized(k, n)
}

// sized completes a value of n bytes, items or entries: bytes are taken
// (an ext's after its type byte), containers only checked to fit, as every
// item takes at least one byte.
func (r *Reader) sized(k Kind, n uint64) (Head, error) {
	left := uint64(len(r.b) - r.i)
	switch k {
	case Ext:
		if n >= left { // the type byte, then n bytes
			return Head{}, ErrShort
		}
		h := Head{Kind: Ext, ExtType: int8(r.b[r.i]), N: n, off: r.i + 1}
		r.i += 1 + int(n)
		return h, nil
	case Str, Bin:
		if n > left {
			return Head{}, ErrShort
		}
		r.i += int(n)
		return Head{Kind: k, N: n, off: r.i - int(n)}, nil
	case Map:
		if n > left/2 {
			return Head{}, ErrShort
		}
	default:
		if n > left {
			return Head{}, ErrShort
		}
	}
	return Head{Kind: k, N: n}, nil
}

// Bytes are the bytes of the str, bin or ext h, a slice of the payload;
// nil for other kinds.
func (r *Reader) Bytes(h Head) []byte {
	switch h.Kind {
	case Str, Bin, Ext:
		return r.b[h.off : h.off+int(h.N)]
	}
	return nil
}

// Skip reads past the items of the value h, read at depth, checking them
// as Head does; for a value that is not an array or a map it does nothing.
func (r *Reader) Skip(h Head, depth int) error {
	n := h.N
	switch h.Kind {
	case Map:
		n *= 2
	case Array:
	default:
		return nil
	}
	for ; n > 0; n-- {
		it, err := r.Head(depth + 1)
		if err != nil {
			return err
		}
		if err := r.Skip(it, depth+1); err != nil {
			return err
		}
	}
	return nil
}
