package cardboxhttp_test

import (
	"fmt"
	"testing"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/cardboxhttp"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/store"
)

// The CardBox domain's errors take their kinds from its mapper; the
// errors it wraps that have a kind already keep it.
func TestEveryCardBoxErrorMaps(t *testing.T) {
	for _, tt := range []struct {
		err    error
		status int
	}{
		{&rules.ValidationError{Field: "f", Reason: "r"}, 400},
		{fmt.Errorf("load: %w", rules.ErrNotFound), 404},
		{&rules.ConflictError{CardIDs: []string{"a"}}, 409},
		{&rules.UnknownCardsError{CardIDs: []string{"a"}}, 422},
		{fmt.Errorf("query: %w", &fault.Error{Kind: fault.Unavailable}), 503},
		{fmt.Errorf("add cards: %w", store.QuotaExceeded("acme", 10, 10, 1)), 507},
	} {
		got := api.ErrorOf(tt.err)
		if e := cardboxhttp.MapError(tt.err); e != nil {
			got = api.ErrorOf(e)
		}
		if got.Status != tt.status {
			t.Errorf("%v: %+v, want status %d", tt.err, got, tt.status)
		}
	}
}
