package cxdbhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/membudget"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// Context lists and searches are charged to the answer budget as turn
// pages are (docs/cxdb-http.md, "Answer bounds"): entry by entry as they
// are built, until sent.

// titledContexts makes n contexts whose first turns carry titles of
// titleBytes (label "big"), waits until their metadata is extracted, and
// returns their ids.
func titledContexts(t *testing.T, h *apitest.CXDB, n, titleBytes int) []uint64 {
	t.Helper()
	c := h.Client()
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = newContext(t, c)
		appendBinary(t, c, ids[i], userTurn(t, "hi", fmt.Sprintf("title %02d ", i)+strings.Repeat("x", titleBytes), "big"))
	}
	tenant, err := h.Engine.Tenant(context.Background(), ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	waitfor.Soon(t, "every context's title to be extracted", func() bool {
		all, err := h.Svc.MetaStore().Metadata(context.Background(), tenant, nil)
		if err != nil {
			t.Fatal(err)
		}
		titled := 0
		for _, m := range all {
			if m.Title != nil && len(*m.Title) > titleBytes {
				titled++
			}
		}
		return titled == n
	})
	return ids
}

// titledServerOnBudget starts a server whose HTTP answers are charged to
// a budget of budgetSize bytes (a request waits up to a minute for room
// in it), holding n contexts titled titleBytes each.
func titledServerOnBudget(t *testing.T, budgetSize int64, n, titleBytes int) (*apitest.CXDB, *membudget.Budget) {
	t.Helper()
	budget := membudget.New(budgetSize, 0, 0)
	h := apitest.NewCXDBWith(t, apitest.Options{Answers: budget, AnswerWait: time.Minute})
	titledContexts(t, h, n, titleBytes)
	return h, budget
}

// answer is how one of getAll's requests ended.
type answer struct {
	path   string
	status int
	body   []byte
	err    error
}

// getAll sends a GET of every path at once and returns the answers, in
// no particular order, once all are in. It does not fail the test: it
// may run in the test's goroutines.
func getAll(h *apitest.CXDB, paths []string) []answer {
	answers := make([]answer, len(paths))
	var wg sync.WaitGroup
	for i, path := range paths {
		wg.Go(func() {
			a := &answers[i]
			a.path = path
			res, err := http.Get(h.URL + path)
			if err != nil {
				a.err = err
				return
			}
			defer res.Body.Close()
			a.status = res.StatusCode
			a.body, a.err = io.ReadAll(res.Body)
		})
	}
	wg.Wait()
	return answers
}

type budgetListPage struct {
	Contexts   []map[string]any
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor"`
}

type budgetSearch struct {
	Contexts   []map[string]any
	TotalCount int  `json:"total_count"`
	Truncated  bool `json:"truncated"`
}

func TestContextListsAndSearchesAreChargedToTheAnswerBudget(t *testing.T) {
	const (
		titleBytes = 4 << 20
		contexts   = 6
		budgetSize = 10 << 20 // two entries, not three
	)
	h, budget := titledServerOnBudget(t, budgetSize, contexts, titleBytes)
	search := "/v1/contexts/search?q=" + urlQuery(`label = "big"`)

	t.Run("one list over the budget stops at it", func(t *testing.T) {
		w := apitest.WatchHeld(t, budget)
		seen, pages := map[string]bool{}, 0
		for cursor := ""; ; pages++ {
			var p budgetListPage
			h.Get("/v1/contexts?limit=20"+cursor).Want(t, http.StatusOK).JSON(t, &p)
			if len(p.Contexts) != 2 && p.HasMore {
				t.Fatalf("page %d: %d contexts of 4 MiB and has_more, want the 2 the budget holds", pages, len(p.Contexts))
			}
			for _, e := range p.Contexts {
				seen[e["context_id"].(string)] = true
			}
			if !p.HasMore {
				break
			}
			cursor = "&cursor=" + p.NextCursor
		}
		if len(seen) != contexts || pages != 2 {
			t.Fatalf("%d contexts in %d pages, want %d in 3", len(seen), pages+1, contexts)
		}
		var found budgetSearch
		h.Get(search).Want(t, http.StatusOK).JSON(t, &found)
		if !found.Truncated || len(found.Contexts) != 2 || found.TotalCount != contexts {
			t.Fatalf("search: %d contexts of %d, truncated %v; want the 2 the budget holds", len(found.Contexts), found.TotalCount, found.Truncated)
		}
		if most := w.Most(); most < 2*titleBytes || most > budgetSize {
			t.Fatalf("the lists held at most %d bytes of the budget, want two entries' (%d) and at most %d", most, 2*titleBytes, budgetSize)
		}
		waitfor.Soon(t, "the answers' bytes released once sent", func() bool { return budget.Held() == 0 })
	})

	t.Run("concurrent lists share it and all answer", func(t *testing.T) {
		w := apitest.WatchHeld(t, budget)
		paths := []string{"/v1/contexts?limit=20", search, "/v1/contexts?limit=20&label=big", search, "/v1/contexts?limit=1000&include_provenance=1", search}
		for _, a := range getAll(h, paths) {
			if a.err != nil || a.status != http.StatusOK {
				t.Errorf("%s: %d, %v: %.300s", a.path, a.status, a.err, a.body)
				continue
			}
			r := apitest.Response{Status: a.status, Body: a.body}
			if strings.HasPrefix(a.path, "/v1/contexts/search") {
				var found budgetSearch
				r.JSON(t, &found)
				if len(found.Contexts) == 0 || len(found.Contexts) > 2 || !found.Truncated {
					t.Errorf("%s: %d contexts, truncated %v", a.path, len(found.Contexts), found.Truncated)
				}
				continue
			}
			var p budgetListPage
			r.JSON(t, &p)
			if len(p.Contexts) == 0 || len(p.Contexts) > 2 || !p.HasMore || p.NextCursor == "" {
				t.Errorf("%s: %d contexts, has_more %v", a.path, len(p.Contexts), p.HasMore)
			}
		}
		most := w.Most()
		t.Logf("%d lists and searches at once held at most %d bytes of a %d-byte budget", len(paths), most, budgetSize)
		if most < titleBytes || most > budgetSize {
			t.Fatalf("held at most %d bytes, want at least one entry's (%d) and at most the budget's %d", most, titleBytes, budgetSize)
		}
		waitfor.Soon(t, "the answers' bytes released once sent", func() bool { return budget.Held() == 0 })
	})
}

// TestSpentAnswerBudgetRefusesLargeListsAndSearches: with the budget spent
// (by binary answers, say), a large list or search is 503 with Retry-After
// as a turn page is, and so is a filtered one that must read a large
// context's metadata to filter; a small one is not charged and answers.
func TestSpentAnswerBudgetRefusesLargeListsAndSearches(t *testing.T) {
	budget := membudget.New(1<<20, 0, 0)
	h := apitest.NewCXDBWith(t, apitest.Options{Answers: budget, AnswerWait: 50 * time.Millisecond})
	titledContexts(t, h, 1, 100<<10) // over the 64 KiB answers need not be charged
	c := h.Client()
	appendBinary(t, c, newContext(t, c), userTurn(t, "hi", "small", "small"))
	if err := budget.Acquire(context.Background(), "default", budget.Total()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { budget.Release("default", budget.Total()) })
	d := apitest.NewDocCheck(t, h.URL)
	for _, path := range []string{
		"/v1/contexts", "/v1/contexts/search?q=" + urlQuery(`label = "big"`),
		"/v1/contexts?label=small", "/v1/contexts/search?q=" + urlQuery(`label = "small"`),
	} {
		r := d.Call(http.StatusServiceUnavailable, http.MethodGet, path, nil)
		if e := r.APIError(t); r.Header.Get("Retry-After") != "1" || e.Kind != "UNAVAILABLE" || e.Details["needed_bytes"] == nil {
			t.Errorf("%s with the budget spent: %+v, Retry-After %q", path, e, r.Header.Get("Retry-After"))
		}
	}
	var p budgetListPage
	d.Call(http.StatusOK, http.MethodGet, "/v1/contexts?limit=1", nil).JSON(t, &p)
	if len(p.Contexts) != 1 || p.Contexts[0]["labels"].([]any)[0] != "small" {
		t.Errorf("the newest context's page with the budget spent: %v", p.Contexts)
	}
}
