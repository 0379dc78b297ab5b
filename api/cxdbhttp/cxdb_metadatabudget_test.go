package cxdbhttp_test

import (
	"net/http"
	"testing"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// A filtered list or a search reads every context's metadata to filter
// it: in batches, each charged to the answer budget while the filter looks
// at it (docs/cxdb-http.md, "Answer bounds"), so that concurrent filters
// over large titles hold at most the budget and all answer.
func TestFiltersChargeTheMetadataTheyRead(t *testing.T) {
	const (
		titleBytes = 4 << 20
		contexts   = 4
		budgetSize = 10 << 20 // two titles, not three
	)
	h, budget := titledServerOnBudget(t, budgetSize, contexts, titleBytes)

	w := apitest.WatchHeld(t, budget)
	// Nothing matches: what the budget held is the metadata filtered.
	paths := []string{
		"/v1/contexts/search?q=" + urlQuery(`label = "none"`), "/v1/contexts?label=none",
		"/v1/contexts/search?q=" + urlQuery(`title ^~= "nothing"`), "/v1/contexts?tag=none",
	}
	for _, a := range getAll(h, paths) {
		if a.err != nil || a.status != http.StatusOK {
			t.Errorf("%s: %d, %v: %.300s", a.path, a.status, a.err, a.body)
		}
	}
	most := w.Most()
	t.Logf("%d filters at once held at most %d bytes of a %d-byte budget", len(paths), most, budgetSize)
	if most < titleBytes || most > budgetSize {
		t.Fatalf("held at most %d bytes, want at least one title's (%d) and at most the budget's %d", most, titleBytes, budgetSize)
	}
	waitfor.Soon(t, "the metadata's bytes released once filtered", func() bool { return budget.Held() == 0 })
}
