package cxdbhttp_test

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/internal/membudget"
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
	budget := membudget.New(budgetSize, 0, 0)
	h := apitest.NewCXDBWith(t, apitest.Options{Answers: budget, AnswerWait: time.Minute})
	titledContexts(t, h, contexts, titleBytes)

	w := apitest.WatchHeld(t, budget)
	// Nothing matches: what the budget held is the metadata filtered.
	paths := []string{
		"/v1/contexts/search?q=" + urlQuery(`label = "none"`), "/v1/contexts?label=none",
		"/v1/contexts/search?q=" + urlQuery(`title ^~= "nothing"`), "/v1/contexts?tag=none",
	}
	type answer struct {
		path   string
		status int
		body   string
		err    error
	}
	answers := make(chan answer, len(paths))
	var wg sync.WaitGroup
	for _, path := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := http.Get(h.URL + path)
			if err != nil {
				answers <- answer{path: path, err: err}
				return
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			answers <- answer{path, res.StatusCode, string(body), err}
		}()
	}
	wg.Wait()
	close(answers)
	for a := range answers {
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
