package cxdbhttp

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api/internal/answers"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/fault"
)

// Directory listings and the type list have no paging in the CXDB API, so
// they are answered whole or not at all: charged at their estimated JSON
// before it is built (503 with Retry-After when the budget has no room),
// and a listing past service.MaxPageBytes, as much as a turn page may
// hold, is 422.

// fsEntryOverhead is at least an fs entry's JSON besides its name and
// hash: keys, kind, mode, size and separators.
const fsEntryOverhead = 96

// fsListingSize is at least d's JSON.
func fsListingSize(d *service.FSListing) int64 {
	n := int64(128 + len(d.TurnID) + answers.StringLen(d.Path) + len(d.FSRootHash))
	for _, e := range d.Entries {
		n += fsEntryOverhead + int64(answers.StringLen(e.Name)+len(e.Hash))
	}
	return n
}

// typesSize is at least the JSON of GET /v1/registry/types.
func typesSize(types []registry.TypeSummary) int64 {
	n := int64(16)
	for _, t := range types {
		n += 64 + int64(answers.StringLen(t.TypeID)+11*len(t.Versions))
	}
	return n
}

// writeFSListing answers a directory, charged to the answer budget.
func (r *Routes) writeFSListing(c echo.Context, charge *answers.Charge, d *service.FSListing) error {
	size := fsListingSize(d)
	if size > service.MaxPageBytes {
		e := fault.New(fault.Unprocessable,
			"directory too large to list: %d entries, at least %d bytes of JSON, over the %d bytes an answer may hold; read its entries by path",
			len(d.Entries), size, service.MaxPageBytes)
		e.Details = map[string]any{"entries": len(d.Entries), "size": size, "limit": service.MaxPageBytes}
		return e
	}
	return writeChargedJSON(c, charge, size, d)
}

// writeChargedJSON reserves estimate bytes (at least v's JSON), then
// renders v and answers it; the charge is held until it is sent.
func writeChargedJSON(c echo.Context, charge *answers.Charge, estimate int64, v any) error {
	if err := charge.Reserve(estimate); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n') // as echo's c.JSON writes it
	if extra := int64(len(b)) - estimate; extra > 0 {
		if err := charge.Reserve(extra); err != nil {
			return err
		}
	}
	charge.Settle(int64(len(b)))
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(b)))
	return c.JSONBlob(http.StatusOK, b)
}
