package service

import (
	"fmt"
	"strconv"

	"github.com/cardboxhq/cardbox/internal/fault"
)

// The service's own errors are *fault.Error values (internal/fault), as
// the store's are: a malformed parameter is fault.Invalid and names the
// parameter in its details, an unknown id fault.NotFound, well-formed
// input the data does not allow fault.Unprocessable.

func invalidParam(param, format string, args ...any) *fault.Error {
	e := fault.New(fault.Invalid, "%s: %s", param, fmt.Sprintf(format, args...))
	return e.With("parameter", param)
}

func notFound(format string, args ...any) *fault.Error {
	return fault.New(fault.NotFound, format, args...)
}

func unprocessable(details map[string]any, format string, args ...any) *fault.Error {
	e := fault.New(fault.Unprocessable, format, args...)
	e.Details = details
	return e
}

// idString renders an id as CXDB's HTTP JSON does: a decimal string.
func idString(id uint64) string { return strconv.FormatUint(id, 10) }
