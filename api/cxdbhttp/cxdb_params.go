package cxdbhttp

import (
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/internal/fault"
)

// pathParam returns a path segment percent-decoded (bundle and type ids
// carry '#', which clients send as %23).
func pathParam(c echo.Context, name string) (string, error) {
	v := c.Param(name)
	// The router matches the raw path when the request's differs from
	// its decoded form's default encoding (RawPath set), the decoded path
	// otherwise: only the first is still to be decoded. Decoding the
	// second again would make an id holding '%' unaddressable.
	if c.Request().URL.RawPath != "" {
		var err error
		if v, err = url.PathUnescape(v); err != nil {
			return "", paramError(name, "not a valid percent-encoded path segment")
		}
	}
	if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
		return "", paramError(name, "must be UTF-8 without NUL")
	}
	return v, nil
}

// idParam parses a u64 id from the path.
func idParam(c echo.Context, name string) (uint64, error) {
	id, err := strconv.ParseUint(c.Param(name), 10, 64)
	if err != nil {
		return 0, paramError(name, "must be a decimal u64, got %q", c.Param(name))
	}
	return id, nil
}

// queryUint parses an optional unsigned query parameter of at most bits
// bits; absent is def.
func queryUint(c echo.Context, name string, bits int, def uint64) (uint64, error) {
	s := c.QueryParam(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, paramError(name, "must be a decimal u%d, got %q", bits, s)
	}
	return v, nil
}

// queryEnum returns an optional query parameter that must be one of
// values; absent is values[0].
func queryEnum(c echo.Context, name string, values ...string) (string, error) {
	s := c.QueryParam(name)
	if s == "" {
		return values[0], nil
	}
	for _, v := range values {
		if s == v {
			return s, nil
		}
	}
	return "", paramError(name, "must be one of %s, got %q", strings.Join(values, ", "), s)
}

// queryBool reads a flag the CXDB UI sends as "true" and the reference
// reads as "1".
func queryBool(c echo.Context, name string) (bool, error) {
	switch c.QueryParam(name) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, paramError(name, "must be 1, true, 0 or false")
}

func paramError(name, format string, args ...any) *fault.Error {
	e := fault.New(fault.Invalid, name+": "+format, args...)
	e.Details = map[string]any{"parameter": name}
	return e
}

// idString renders an id as CXDB's HTTP JSON does: a decimal string.
func idString(id uint64) string { return strconv.FormatUint(id, 10) }
