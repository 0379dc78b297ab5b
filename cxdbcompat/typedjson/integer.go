package typedjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// maxExp bounds the decimal exponent integerText expands: any non-zero
// value of 10^40 or more is far beyond 64 bits.
const maxExp = 40

var (
	errFraction = errors.New("has a fractional part")
	errTooLarge = errors.New("too large")
)

// integer writes an integer-typed field at its fixed size (d3, cf, ce, d2
// or cc), as the Go client does for int64, uint64, uint32, int32 and uint8.
func (s *state) integer(v any, f registry.Field, k kind, at *path) error {
	text, err := integerInput(v, f, k, at)
	if err != nil {
		return err
	}
	if k == kUint64 {
		return s.uint64Field(text, f, at)
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return parseErr(at, f, err)
	}
	return s.sized(n, f, k, at)
}

// uint64Field writes a u64 field as cf (9 bytes); negative values are out
// of range, except for minus zero.
func (s *state) uint64Field(text string, f registry.Field, at *path) error {
	if neg, ok := strings.CutPrefix(text, "-"); ok {
		if strings.Trim(neg, "0") != "" {
			return rangeErr(at, f)
		}
		text = neg
	}
	u, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return parseErr(at, f, err)
	}
	s.put(s.enc.EncodeUint64(u))
	return nil
}

// sized range-checks n for a 32- or 8-bit field and writes it at the
// field's size; int64 and time fields are written as d3.
func (s *state) sized(n int64, f registry.Field, k kind, at *path) error {
	switch k {
	case kUint32:
		if n < 0 || n > math.MaxUint32 {
			return rangeErr(at, f)
		}
		s.put(s.enc.EncodeUint32(uint32(n)))
	case kInt32:
		if n < math.MinInt32 || n > math.MaxInt32 {
			return rangeErr(at, f)
		}
		s.put(s.enc.EncodeInt32(int32(n)))
	case kUint8:
		if n < 0 || n > math.MaxUint8 {
			return rangeErr(at, f)
		}
		s.put(s.enc.EncodeUint8(uint8(n)))
	default:
		s.put(s.enc.EncodeInt64(n))
	}
	return nil
}

// integerInput returns the decimal text of an integer field's value: a JSON
// number with an integral value, a decimal string for u64 and int64 fields
// (the typed view renders them as strings), or an RFC 3339 time for time
// fields (converted to unix milliseconds).
func integerInput(v any, f registry.Field, k kind, at *path) (string, error) {
	switch x := v.(type) {
	case json.Number:
		text, err := integerText(string(x))
		if err != nil {
			return "", parseErr(at, f, err)
		}
		return text, nil
	case string:
		return integerString(x, f, k, at)
	}
	if k == kTime {
		return "", typeErr(at, "unix ms or RFC 3339 string", v)
	}
	return "", typeErr(at, "integer", v)
}

// integerString accepts the string renderings of an integer field.
func integerString(str string, f registry.Field, k kind, at *path) (string, error) {
	switch {
	case k == kTime:
		t, err := time.Parse(time.RFC3339Nano, str)
		if err != nil {
			return "", fieldErr(at, fmt.Sprintf("invalid time %q (want RFC 3339 or unix ms)", str))
		}
		return strconv.FormatInt(t.UnixMilli(), 10), nil
	case f.Enum != "" && !isDecimal(str):
		return "", fieldErr(at, fmt.Sprintf("unknown label %q for enum %q", str, f.Enum))
	case (k == kUint64 || k == kInt64) && isDecimal(str):
		return str, nil
	}
	return "", typeErr(at, "integer", str)
}

// isDecimal reports whether str is plain decimal digits, optionally with a
// leading minus sign.
func isDecimal(str string) bool {
	str = strings.TrimPrefix(str, "-")
	if str == "" || len(str) > 64 {
		return false
	}
	for i := 0; i < len(str); i++ {
		if str[i] < '0' || str[i] > '9' {
			return false
		}
	}
	return true
}

func rangeErr(at *path, f registry.Field) error {
	return fieldErr(at, "out of range for "+f.Type)
}

// parseErr turns an integer parse failure into a field error.
func parseErr(at *path, f registry.Field, err error) error {
	if errors.Is(err, errFraction) {
		return fieldErr(at, "must be an integer for "+f.Type)
	}
	if errors.Is(err, errTooLarge) || errors.Is(err, strconv.ErrRange) {
		return rangeErr(at, f)
	}
	return fieldErr(at, "not an integer")
}

// integerText rewrites a JSON number as plain integer digits. A number with
// a fraction or an exponent is accepted when its value is an exact integer;
// the exponent is bounded so hostile input cannot build huge strings.
func integerText(num string) (string, error) {
	if !strings.ContainsAny(num, ".eE") {
		return num, nil
	}
	sign := ""
	if strings.HasPrefix(num, "-") {
		sign, num = "-", num[1:]
	}
	digits, exp := splitNumber(num)
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "0", nil
	}
	text, err := shift(digits, exp)
	if err != nil {
		return "", err
	}
	return sign + text, nil
}

// splitNumber splits an unsigned JSON number into its significant digits
// (decimal point removed) and the power of ten they are scaled by.
func splitNumber(num string) (string, int) {
	mant, expText := num, "0"
	if i := strings.IndexAny(num, "eE"); i >= 0 {
		mant, expText = num[:i], num[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	exp, err := strconv.Atoi(expText)
	if err != nil {
		if strings.HasPrefix(expText, "-") {
			exp = -math.MaxInt32
		} else {
			exp = math.MaxInt32
		}
	}
	return intPart + frac, exp - len(frac)
}

// shift returns digits × 10^exp as integer digits; digits has no leading
// zeros and is not empty.
func shift(digits string, exp int) (string, error) {
	if exp >= 0 {
		if exp > maxExp {
			return "", errTooLarge
		}
		return digits + strings.Repeat("0", exp), nil
	}
	if -exp >= len(digits) {
		return "", errFraction
	}
	keep := len(digits) + exp
	if strings.Trim(digits[keep:], "0") != "" {
		return "", errFraction
	}
	return digits[:keep], nil
}
