package api

import (
	"net/http"
	"testing"

	"github.com/cardboxhq/cardbox/internal/fault"
)

// Every error kind maps to the HTTP status and kind of internal/fault's
// table, once; the binary surface's frames are checked against the same
// table in cxdbcompat/server (the CardBox domain's mapper is checked in
// cardboxhttp).
func TestEveryErrorKindMaps(t *testing.T) {
	for _, k := range fault.Kinds {
		e := ErrorOf(&fault.Error{Kind: k, Message: "m"})
		if e.Status != k.Status() || e.Kind != k.String() || e.Message != "m" {
			t.Errorf("kind %v: %+v", k, e)
		}
		if (k == fault.Internal) != (e.Status == http.StatusInternalServerError) {
			t.Errorf("kind %v is status %d: only internal errors are 500", k, e.Status)
		}
	}
}
