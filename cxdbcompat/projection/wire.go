package projection

import (
	"errors"
	"fmt"
	"math"
)

// The msgpack wire format, read straight from the payload bytes. Declared
// lengths are checked against the bytes left before anything is read or
// allocated: payloads come from clients.

// kind is what a msgpack value is, as far as projection tells apart.
type kind uint8

const (
	kNil   kind = iota
	kBool       // u is 1 for true
	kUint       // an integer >= 0, in u
	kNeg        // a negative integer, int64(u)
	kFloat      // float64 bits in u; float32 is widened
	kStr        // s
	kBin        // s
	kArray      // u items follow
	kMap        // u entries follow
	kExt        // any ext type, already skipped
)

// head is a value's header: a whole scalar, str or bin, or the length of an
// array or map whose items follow in the reader.
type head struct {
	k   kind
	u   uint64 // also the length of a str or bin
	off int    // where a str's or bin's bytes start in the payload
}

// maxDepth bounds nesting, so a hostile payload cannot exhaust the stack.
const maxDepth = 256

var (
	errTooDeep = errors.New("nested too deeply")
	errShort   = errors.New("unexpected end of payload, or a length beyond it")
)

// reader reads msgpack values from b, from offset i.
type reader struct {
	b []byte
	i int
}

// head reads the header of the value at depth.
func (r *reader) head(depth int) (head, error) {
	if depth > maxDepth || r.i >= len(r.b) {
		return head{}, r.headErr(depth)
	}
	c := r.b[r.i]
	r.i++
	switch {
	case c <= 0x7f: // positive fixint
		return head{k: kUint, u: uint64(c)}, nil
	case c >= 0xa0 && c <= 0xbf: // fixstr
		n := int(c & 0x1f)
		if n > len(r.b)-r.i {
			return head{}, errShort
		}
		r.i += n
		return head{k: kStr, u: uint64(n), off: r.i - n}, nil
	case c >= 0xe0: // negative fixint
		return head{k: kNeg, u: uint64(int64(int8(c)))}, nil
	case c <= 0x8f:
		return r.sized(kMap, uint64(c&0x0f))
	case c <= 0x9f:
		return r.sized(kArray, uint64(c&0x0f))
	}
	return r.headC(c)
}

func (r *reader) headErr(depth int) error {
	if depth > maxDepth {
		return errTooDeep
	}
	return errShort
}

// headC reads the rest of a value whose code is in 0xc0..0xdf.
func (r *reader) headC(c byte) (head, error) {
	switch {
	case c == 0xc0:
		return head{k: kNil}, nil
	case c == 0xc2 || c == 0xc3:
		return head{k: kBool, u: uint64(c - 0xc2)}, nil
	case c >= 0xc4 && c <= 0xc6: // bin 8, 16, 32
		return r.lengthThen(kBin, 1<<(c-0xc4))
	case c >= 0xc7 && c <= 0xc9: // ext 8, 16, 32
		return r.lengthThen(kExt, 1<<(c-0xc7))
	case c == 0xca, c == 0xcb: // float 32, 64
		return r.float(c == 0xcb)
	case c >= 0xcc && c <= 0xcf: // uint 8 .. 64
		n, err := r.uint(1 << (c - 0xcc))
		return head{k: kUint, u: n}, err
	case c >= 0xd0 && c <= 0xd3: // int 8 .. 64
		return r.int(1 << (c - 0xd0))
	case c >= 0xd4 && c <= 0xd8: // fixext 1 .. 16, and the type byte
		return r.sized(kExt, 1<<(c-0xd4))
	case c >= 0xd9 && c <= 0xdb: // str 8, 16, 32
		return r.lengthThen(kStr, 1<<(c-0xd9))
	case c == 0xdc || c == 0xdd: // array 16, 32
		return r.lengthThen(kArray, 2<<(c-0xdc))
	case c == 0xde || c == 0xdf: // map 16, 32
		return r.lengthThen(kMap, 2<<(c-0xde))
	}
	return head{}, fmt.Errorf("unknown code %#x", c)
}

// uint reads a big-endian unsigned integer of width bytes.
func (r *reader) uint(width int) (uint64, error) {
	if width > len(r.b)-r.i {
		return 0, errShort
	}
	var n uint64
	for _, x := range r.b[r.i : r.i+width] {
		n = n<<8 | uint64(x)
	}
	r.i += width
	return n, nil
}

// int reads a big-endian signed integer of width bytes.
func (r *reader) int(width int) (head, error) {
	u, err := r.uint(width)
	shift := 64 - 8*width
	n := int64(u<<shift) >> shift
	if n < 0 {
		return head{k: kNeg, u: uint64(n)}, err
	}
	return head{k: kUint, u: uint64(n)}, err
}

func (r *reader) float(double bool) (head, error) {
	if !double {
		u, err := r.uint(4)
		f := float64(math.Float32frombits(uint32(u)))
		return head{k: kFloat, u: math.Float64bits(f)}, err
	}
	u, err := r.uint(8)
	return head{k: kFloat, u: u}, err
}

// lengthThen reads a length of width bytes, then what it sizes.
func (r *reader) lengthThen(k kind, width int) (head, error) {
	n, err := r.uint(width)
	if err != nil {
		return head{}, err
	}
	return r.sized(k, n)
}

// sized completes a value of n bytes, items or entries: bytes are taken
// (an ext also has its type byte), containers only checked to fit, as
// every item takes at least one byte.
func (r *reader) sized(k kind, n uint64) (head, error) {
	left := uint64(len(r.b) - r.i)
	switch k {
	case kExt:
		n++
		fallthrough
	case kStr, kBin:
		if n > left {
			return head{}, errShort
		}
		r.i += int(n)
		return head{k: k, u: n, off: r.i - int(n)}, nil
	case kMap:
		if n > left/2 {
			return head{}, errShort
		}
	default:
		if n > left {
			return head{}, errShort
		}
	}
	return head{k: k, u: n}, nil
}

// bytes are the bytes of the str or bin h.
func (r *reader) bytes(h head) []byte {
	return r.b[h.off : h.off+int(h.u)]
}

// skip reads past the items of the value h at depth, checking them.
func (r *reader) skip(h head, depth int) error {
	n := h.u
	switch h.k {
	case kMap:
		n *= 2
	case kArray:
	default:
		return nil
	}
	for ; n > 0; n-- {
		it, err := r.head(depth + 1)
		if err != nil {
			return err
		}
		if err := r.skip(it, depth+1); err != nil {
			return err
		}
	}
	return nil
}
