package projection

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// JSON text: strings and numbers as encoding/json writes them, except that
// <, > and & stay as they are.

const hexDigits = "0123456789abcdef"

// escaped marks the bytes appendEscaped looks at: control characters, '"',
// '\\', and 0xe2, which starts U+2028 and U+2029 (escaped for JavaScript).
var escaped = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'], t[0xe2] = true, true, true
	return t
}()

// plainLen is the length of the longest prefix of s that is ASCII and
// needs no escape: usually all of s.
func plainLen[S string | []byte](s S) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if !plain8(s[i : i+8]) {
			break
		}
	}
	for ; i < len(s) && s[i] < utf8.RuneSelf && !escaped[s[i]]; i++ {
	}
	return i
}

// plain8 tells whether none of the 8 bytes of s is a control character,
// '"', '\\' or beyond ASCII.
func plain8[S string | []byte](s S) bool {
	_ = s[7]
	w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^(ones*'"'), w^(ones*'\\')
	special := (w - ones*0x20) | (quote-ones)&^quote | (backslash-ones)&^backslash | w
	return special&highs == 0
}

// appendEscaped appends s, valid UTF-8, escaped for a JSON string.
func appendEscaped[S string | []byte](dst []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !escaped[c] {
			continue
		}
		if c == 0xe2 {
			if i+2 >= len(s) || s[i+1] != 0x80 || s[i+2]&^1 != 0xa8 {
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\u202`...)
			dst = append(dst, hexDigits[s[i+2]&0xf])
			i += 2
			start = i + 1
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = appendEscape(dst, c)
		start = i + 1
	}
	return append(dst, s[start:]...)
}

// appendEscape appends the escape of an ASCII byte.
func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// appendValue appends a string value: invalid UTF-8 is "" (spec 5.3).
func appendValue(dst, s []byte) []byte {
	n := plainLen(s)
	if n < len(s) && !utf8.Valid(s[n:]) {
		return append(dst, '"', '"')
	}
	dst = append(dst, '"')
	dst = append(dst, s[:n]...)
	dst = appendEscaped(dst, s[n:])
	return append(dst, '"')
}

// appendKey appends an object key or a label: each byte of invalid UTF-8
// is \ufffd, as encoding/json writes it.
func appendKey(dst, s []byte) []byte {
	n := plainLen(s)
	dst = append(dst, '"')
	dst = append(dst, s[:n]...)
	s = s[n:]
	valid := 0 // s[:valid] is valid and not yet appended
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = appendEscaped(dst, s[valid:i])
			dst = append(dst, `\ufffd`...)
			valid = i + 1
		}
		i += n
	}
	dst = appendEscaped(dst, s[valid:])
	return append(dst, '"')
}

// appendName appends a field's name or an enum label as appendKey does.
func appendName(dst []byte, s string) []byte {
	n := plainLen(s)
	if n == len(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	if !utf8.ValidString(s[n:]) {
		return appendKey(dst, []byte(s))
	}
	dst = append(dst, '"')
	dst = append(dst, s[:n]...)
	dst = appendEscaped(dst, s[n:])
	return append(dst, '"')
}

// appendFloat appends f as encoding/json does; NaN and infinities are 0.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, '0')
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}
