package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/internal/quota"
	"github.com/cardboxhq/cardbox/store"
)

// Every error kind of the turn store and of the CardBox domain maps to an
// HTTP status, once; the binary surface's table is checked the same way
// in cxdbcompat/server.
func TestEveryErrorKindMaps(t *testing.T) {
	for _, k := range store.Kinds {
		e := StoreErrors(&store.Error{Kind: k, Msg: "m"})
		wantKind, ok := storeKinds[k]
		if !ok && e != nil {
			wantKind = kinds[e.Status]
		}
		if e == nil || e.Status == 0 || e.Kind != wantKind {
			t.Errorf("store kind %v: %+v", k, e)
		}
		if (k == store.KindInternal) != (e.Status == http.StatusInternalServerError) {
			t.Errorf("store kind %v is status %d: only internal errors are 500", k, e.Status)
		}
	}
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
		got := CardBoxErrors(tt.err)
		if got == nil {
			got = StoreErrors(tt.err)
		}
		if got == nil || got.Status != tt.status {
			t.Errorf("%v: %+v, want status %d", tt.err, got, tt.status)
		}
	}
}
