package api

import (
	"net/http"
	"testing"

	"github.com/cardboxhq/cardbox/store"
)

// Every error kind of the turn store maps to an HTTP status, once (the
// CardBox domain's are checked in cardboxhttp); the binary surface's table is checked the same way
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
}
