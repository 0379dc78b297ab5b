package cxdbhttp_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
)

// Context lists and searches are bounded in bytes as turn pages are
// (docs/cxdb-http.md, "Answer bounds"): titles come from first turns and
// have no length limit of their own.
func TestContextListsAndSearchesStopAtTheAnswerBound(t *testing.T) {
	h := apitest.NewCXDB(t)
	const contexts, titleBytes = 12, 8 << 20
	want := map[string]bool{}
	for _, id := range titledContexts(t, h, contexts, titleBytes) {
		want[fmt.Sprint(id)] = true
	}
	const bound = service.MaxPageBytes + 64<<10 // the contexts and the answer's other members

	type listPage struct {
		Contexts   []map[string]any
		Count      int    `json:"count"`
		HasMore    bool   `json:"has_more"`
		NextCursor string `json:"next_cursor"`
	}
	for _, query := range []string{"limit=20", "limit=1000&include_provenance=1", "limit=20&label=big"} {
		t.Run(query, func(t *testing.T) {
			seen := map[string]int{}
			cursor, pages := "", 0
			for {
				r := h.Get("/v1/contexts?"+query+cursor).Want(t, http.StatusOK)
				if len(r.Body) > bound {
					t.Fatalf("page %d is %d bytes, over the bound %d", pages, len(r.Body), bound)
				}
				var p listPage
				r.JSON(t, &p)
				pages++
				if len(p.Contexts) == 0 || p.Count != len(p.Contexts) {
					t.Fatalf("page %d: %d contexts, count %d", pages, len(p.Contexts), p.Count)
				}
				for _, e := range p.Contexts {
					seen[e["context_id"].(string)]++
				}
				if pages == 1 && (!p.HasMore || len(p.Contexts) >= contexts) {
					t.Fatalf("the first page holds %d contexts of %d bytes and has_more=%v", len(p.Contexts), len(r.Body), p.HasMore)
				}
				if !p.HasMore {
					if p.NextCursor != "" {
						t.Fatalf("the last page has a cursor")
					}
					break
				}
				if p.NextCursor == "" || pages > contexts {
					t.Fatalf("page %d: has_more without a cursor, or no end", pages)
				}
				cursor = "&cursor=" + p.NextCursor
			}
			// 8 MiB entries: five fit in 48 MiB, the sixth would pass it.
			if pages != 3 {
				t.Fatalf("%d pages, want 3 (5, 5, 2)", pages)
			}
			if len(seen) != contexts {
				t.Fatalf("%d contexts listed, want %d", len(seen), contexts)
			}
			for id, n := range seen {
				if !want[id] || n != 1 {
					t.Fatalf("context %s listed %d times (ours: %v)", id, n, want[id])
				}
			}
		})
	}

	type searchAnswer struct {
		Contexts   []map[string]any
		TotalCount int  `json:"total_count"`
		Truncated  bool `json:"truncated"`
	}
	r := h.Get("/v1/contexts/search?q="+urlQuery(`label = "big"`)).Want(t, http.StatusOK)
	if len(r.Body) > bound {
		t.Fatalf("the search answer is %d bytes, over the bound %d", len(r.Body), bound)
	}
	var found searchAnswer
	r.JSON(t, &found)
	if !found.Truncated || found.TotalCount != contexts || len(found.Contexts) != 5 {
		t.Fatalf("search: %d contexts of %d, truncated=%v", len(found.Contexts), found.TotalCount, found.Truncated)
	}
	// Within the bound, the limit alone cuts, and the answer says it is not truncated.
	var limited searchAnswer
	h.Get("/v1/contexts/search?q="+urlQuery(`label = "big"`)+"&limit=2").Want(t, http.StatusOK).JSON(t, &limited)
	if limited.Truncated || limited.TotalCount != contexts || len(limited.Contexts) != 2 {
		t.Fatalf("limited search: %d contexts of %d, truncated=%v", len(limited.Contexts), limited.TotalCount, limited.Truncated)
	}
}
