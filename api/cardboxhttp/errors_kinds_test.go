package cardboxhttp_test

import (
	"fmt"
	"testing"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/cardboxhttp"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/internal/quota"
	"github.com/cardboxhq/cardbox/store"
)

// Every error of the CardBox domain maps to its HTTP status; a store
// error it wraps maps as the store's.
func TestEveryCardBoxErrorMaps(t *testing.T) {
	for _, tt := range []struct {
		err    error
		status int
	}{
		{&cardbox.ValidationError{Field: "f", Reason: "r"}, 400},
		{fmt.Errorf("load: %w", cardbox.ErrNotFound), 404},
		{&cardbox.ConflictError{CardIDs: []string{"a"}}, 409},
		{&cardbox.UnknownCardsError{CardIDs: []string{"a"}}, 422},
		{fmt.Errorf("query: %w", &store.Error{Kind: store.KindUnavailable}), 503},
		{fmt.Errorf("add cards: %w", quota.Exceeded("acme", 10, 10, 1)), 507},
	} {
		got := cardboxhttp.CardBoxErrors(tt.err)
		if got == nil {
			got = api.StoreErrors(tt.err)
		}
		if got == nil || got.Status != tt.status {
			t.Errorf("%v: %+v, want status %d", tt.err, got, tt.status)
		}
	}
}
