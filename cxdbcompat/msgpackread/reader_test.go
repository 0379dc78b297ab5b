package msgpackread

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/msgpackread/msgpackreadtest"
)

// testDepth is the nesting limit of the readers under test.
const testDepth = 8

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHead(t *testing.T) {
	f32 := math.Float64bits(float64(float32(1.5)))
	tests := []struct {
		name, in string
		want     Head
		bytes    string // hex of Bytes(want)
		left     int    // Len after Head
	}{
		{"positive fixint", "7f", Head{Kind: Uint, N: 127}, "", 0},
		{"negative fixint", "e0", Head{Kind: Neg, N: uint64(0xffffffffffffffe0)}, "", 0},
		{"nil", "c0", Head{Kind: Nil}, "", 0},
		{"false", "c2", Head{Kind: Bool, N: 0}, "", 0},
		{"true", "c3", Head{Kind: Bool, N: 1}, "", 0},
		{"uint8", "cc ff", Head{Kind: Uint, N: 255}, "", 0},
		{"uint16", "cd 01 02", Head{Kind: Uint, N: 0x0102}, "", 0},
		{"uint32", "ce 01 02 03 04", Head{Kind: Uint, N: 0x01020304}, "", 0},
		{"uint64", "cf ff ff ff ff ff ff ff ff", Head{Kind: Uint, N: math.MaxUint64}, "", 0},
		{"int8 negative", "d0 80", Head{Kind: Neg, N: uint64(0xffffffffffffff80)}, "", 0},
		{"int8 positive is uint", "d0 05", Head{Kind: Uint, N: 5}, "", 0},
		{"int16", "d1 ff fe", Head{Kind: Neg, N: uint64(0xfffffffffffffffe)}, "", 0},
		{"int32", "d2 7f ff ff ff", Head{Kind: Uint, N: math.MaxInt32}, "", 0},
		{"int64", "d3 80 00 00 00 00 00 00 00", Head{Kind: Neg, N: 1 << 63}, "", 0},
		{"float32 widened", "ca 3f c0 00 00", Head{Kind: Float, N: f32}, "", 0},
		{"float64", "cb 3f f8 00 00 00 00 00 00", Head{Kind: Float, N: math.Float64bits(1.5)}, "", 0},
		{"fixstr", "a2 68 69 c0", Head{Kind: Str, N: 2, off: 1}, "6869", 1},
		{"empty fixstr", "a0", Head{Kind: Str, off: 1}, "", 0},
		{"str8", "d9 01 78", Head{Kind: Str, N: 1, off: 2}, "78", 0},
		{"str16", "da 00 01 78", Head{Kind: Str, N: 1, off: 3}, "78", 0},
		{"str32", "db 00 00 00 01 78", Head{Kind: Str, N: 1, off: 5}, "78", 0},
		{"bin8", "c4 02 00 01", Head{Kind: Bin, N: 2, off: 2}, "0001", 0},
		{"bin16", "c5 00 01 ff", Head{Kind: Bin, N: 1, off: 3}, "ff", 0},
		{"bin32", "c6 00 00 00 00", Head{Kind: Bin, off: 5}, "", 0},
		{"fixext1", "d4 05 aa", Head{Kind: Ext, ExtType: 5, N: 1, off: 2}, "aa", 0},
		{"fixext16", "d8 ff" + strings.Repeat("01", 16), Head{Kind: Ext, ExtType: -1, N: 16, off: 2}, strings.Repeat("01", 16), 0},
		{"ext8", "c7 02 07 aa bb", Head{Kind: Ext, ExtType: 7, N: 2, off: 3}, "aabb", 0},
		{"ext16 empty", "c8 00 00 01", Head{Kind: Ext, ExtType: 1, off: 4}, "", 0},
		{"ext32", "c9 00 00 00 01 02 aa", Head{Kind: Ext, ExtType: 2, N: 1, off: 6}, "aa", 0},
		{"fixarray leaves items", "92 01 02", Head{Kind: Array, N: 2}, "", 2},
		{"array16", "dc 00 01 c0", Head{Kind: Array, N: 1}, "", 1},
		{"array32", "dd 00 00 00 00", Head{Kind: Array}, "", 0},
		{"fixmap leaves entries", "81 01 02", Head{Kind: Map, N: 1}, "", 2},
		{"map16", "de 00 01 01 02", Head{Kind: Map, N: 1}, "", 2},
		{"map32", "df 00 00 00 00", Head{Kind: Map}, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(unhex(t, tt.in), testDepth)
			h, err := r.Head(0)
			if err != nil || h != tt.want {
				t.Fatalf("Head = %+v, %v; want %+v", h, err, tt.want)
			}
			if got := hex.EncodeToString(r.Bytes(h)); got != strings.ReplaceAll(tt.bytes, " ", "") {
				t.Errorf("Bytes = %s, want %s", got, tt.bytes)
			}
			if r.Len() != tt.left {
				t.Errorf("Len = %d, want %d", r.Len(), tt.left)
			}
		})
	}
}

func TestHeadRefuses(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
	}{
		{"empty", "", ErrShort},
		{"reserved code", "c1", ErrCode},
		{"short uint16", "cd 01", ErrShort},
		{"short int64", "d3 00 00 00 00 00 00 00", ErrShort},
		{"short float32", "ca 00 00 00", ErrShort},
		{"short float64", "cb 00", ErrShort},
		{"fixstr beyond", "a3 61 62", ErrShort},
		{"str8 no length", "d9", ErrShort},
		{"str32 beyond", "db ff ff ff ff 61", ErrShort},
		{"bin16 beyond", "c5 00 02 61", ErrShort},
		{"bin32 huge", "c6 ff ff ff ff", ErrShort},
		{"fixext without type", "d4", ErrShort},
		{"fixext short", "d5 01 00", ErrShort},
		{"ext8 without type", "c7 00", ErrShort},
		{"ext32 huge", "c9 ff ff ff ff 01", ErrShort},
		{"array beyond", "93 01 02", ErrShort},
		{"array32 huge", "dd ff ff ff ff 00", ErrShort},
		{"map needs two bytes an entry", "82 01 02 03", ErrShort},
		{"map32 huge", "df 7f ff ff ff", ErrShort},
		{"map16 no length", "de 00", ErrShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(unhex(t, tt.in), testDepth)
			if h, err := r.Head(0); !errors.Is(err, tt.want) {
				t.Fatalf("Head = %+v, %v; want %v", h, err, tt.want)
			}
		})
	}
}

// nest is n one-item arrays around leaf.
func nest(n int, leaf ...byte) []byte {
	return append(bytes.Repeat([]byte{0x91}, n), leaf...)
}

func TestDepth(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"value in testDepth arrays", nest(testDepth, 0xc0), nil},
		{"empty array in testDepth arrays", nest(testDepth, 0x90), nil},
		{"value in one more", nest(testDepth+1, 0xc0), ErrTooDeep},
		{"map values count too", append(bytes.Repeat([]byte{0x81, 0x01}, testDepth+1), 0xc0), ErrTooDeep},
		{"map keys count too", append(bytes.Repeat([]byte{0x81}, testDepth+1), 0xc0, 0xc0), ErrTooDeep},
		{"short inside", nest(2, 0x92, 0x01), ErrShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.in, testDepth)
			h, err := r.Head(0)
			if err == nil {
				err = r.Skip(h, 0)
			}
			if !errors.Is(err, tt.want) || err == nil && r.Len() != 0 {
				t.Fatalf("Skip: %v with %d bytes left, want %v", err, r.Len(), tt.want)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Nil: "nil", Neg: "negative int", Ext: "ext", Ext + 1: "Kind(10)"} {
		if k.String() != want {
			t.Errorf("%d: %q, want %q", k, k.String(), want)
		}
	}
}

func TestInt64AndFloat64(t *testing.T) {
	tests := []struct {
		h    Head
		n    int64
		ok   bool
		f    float64
		name string
	}{
		{Head{Kind: Uint, N: math.MaxInt64}, math.MaxInt64, true, 0, "largest uint that fits"},
		{Head{Kind: Uint, N: math.MaxInt64 + 1}, math.MinInt64, false, 0, "uint too large"},
		{Head{Kind: Neg, N: uint64(0xffffffffffffffff)}, -1, true, 0, "negative"},
		{Head{Kind: Float, N: math.Float64bits(-2.5)}, 0, false, -2.5, "float"},
		{Head{Kind: Str, N: 3}, 3, false, 0, "str"},
	}
	for _, tt := range tests {
		n, ok := tt.h.Int64()
		if ok != tt.ok || ok && n != tt.n || tt.h.Float64() != tt.f {
			t.Errorf("%s: Int64 = %d, %v; Float64 = %v", tt.name, n, ok, tt.h.Float64())
		}
	}
}

// value reads the next value whole, as msgpackreadtest.Decode gives it.
func value(r *Reader, depth int) (any, error) {
	h, err := r.Head(depth)
	if err != nil {
		return nil, err
	}
	switch h.Kind {
	case Array:
		a := []any{}
		for range h.N {
			v, err := value(r, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		return a, nil
	case Map:
		return mapValue(r, h.N, depth)
	}
	return scalar(r, h), nil
}

func mapValue(r *Reader, n uint64, depth int) (any, error) {
	m := msgpackreadtest.Map{}
	for range n {
		k, err := value(r, depth+1)
		if err != nil {
			return nil, err
		}
		v, err := value(r, depth+1)
		if err != nil {
			return nil, err
		}
		m = append(m, msgpackreadtest.KV{Key: k, Val: v})
	}
	return m, nil
}

func scalar(r *Reader, h Head) any {
	switch h.Kind {
	case Bool:
		return h.N == 1
	case Uint:
		return h.N
	case Neg:
		return int64(h.N)
	case Float:
		return h.Float64()
	case Str:
		return string(r.Bytes(h))
	case Bin:
		return msgpackreadtest.Bin(bytes.Clone(r.Bytes(h)))
	case Ext:
		return msgpackreadtest.Ext{Type: h.ExtType, Data: bytes.Clone(r.Bytes(h))}
	}
	return nil
}

// floatBits is a float by its bits, so that NaNs compare equal.
type floatBits uint64

// exact is v with its floats as floatBits.
func exact(v any) any {
	switch x := v.(type) {
	case float64:
		return floatBits(math.Float64bits(x))
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = exact(x[i])
		}
		return out
	case msgpackreadtest.Map:
		out := make(msgpackreadtest.Map, len(x))
		for i, kv := range x {
			out[i] = msgpackreadtest.KV{Key: exact(kv.Key), Val: exact(kv.Val)}
		}
		return out
	}
	return v
}

// FuzzReader reads untrusted bytes: the reader must not panic, must fail
// exactly when the library does, read the same values, and Skip must
// stop where reading them whole does.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"82 a1 61 93 01 e0 c3 a1 62 de 00 01 c4 01 ff c7 01 05 aa",
		"cb 3f f8 00 00 00 00 00 00", "ca 3f c0 00 00", "d3 80 00 00 00 00 00 00 00",
		"dd ff ff ff ff 00", "c1", "c4 00", "c7 00 01", "a0", "91 91 91 91 91 91 91 91 91 c0", "d8 ff 00",
	} {
		f.Add(unhex(f, s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(b, testDepth)
		got, err := value(&r, 0)
		want, werr := msgpackreadtest.Decode(b, testDepth)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%x: error %v, library %v", b, err, werr)
		}
		if err == nil && !reflect.DeepEqual(exact(got), exact(want)) {
			t.Fatalf("%x: read %#v, library %#v", b, got, want)
		}
		s := NewReader(b, testDepth)
		h, serr := s.Head(0)
		if serr == nil {
			serr = s.Skip(h, 0)
		}
		if (serr == nil) != (err == nil) || s.Len() != r.Len() && err == nil {
			t.Fatalf("%x: skip %v with %d left, read %v with %d left", b, serr, s.Len(), err, r.Len())
		}
	})
}
