package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/store"
)

// Every error kind maps to the HTTP status and kind of internal/fault's
// table, once; the binary surface's frames are checked against the same
// table in cxdbcompat/server. The CardBox domain's errors take their kinds
// from its mapper.
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
	mappers := []ErrorMapper{CardBoxErrors}
	for _, tt := range []struct {
		err    error
		status int
	}{
		{&cardbox.ValidationError{Field: "f", Reason: "r"}, 400},
		{fmt.Errorf("load: %w", cardbox.ErrNotFound), 404},
		{&cardbox.ConflictError{CardIDs: []string{"a"}}, 409},
		{&cardbox.UnknownCardsError{CardIDs: []string{"a"}}, 422},
		{fmt.Errorf("query: %w", &fault.Error{Kind: fault.Unavailable}), 503},
		{fmt.Errorf("add cards: %w", store.QuotaExceeded("acme", 10, 10, 1)), 507},
	} {
		if got := toBody(tt.err, mappers); got.Status != tt.status {
			t.Errorf("%v: %+v, want status %d", tt.err, got, tt.status)
		}
	}
}
