package cardboxhttp_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/internal/membudget"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// A single box's answer (GET, PUT and POST of a box, an append with
// return=box) is charged to the answer budget as boxes/batch charges a
// box (docs/cardbox.md, "Answer bounds"): before the box is loaded, or,
// for a write, before it is written, so that a refused write leaves
// nothing written.
func TestSingleBoxAnswersAreChargedToTheAnswerBudget(t *testing.T) {
	budget := membudget.New(1<<20, 0, 0)
	h := apitest.NewBudgetCardBox(t, budget, 50*time.Millisecond)
	long := strings.Repeat("c", 250) // a card id of some 253 bytes of JSON
	h.AddCards("p", apitest.Card(long, "task.instruction", "x"))
	h.AddCards("p", apitest.Card("small", "task.instruction", "x"))
	idsOf := func(n int) []string { return slices.Repeat([]string{long}, n) }
	const largeIDs = 400 // some 100 KiB: over the 64 KiB answers need not be charged
	const hugeIDs = 5000 // some 1.2 MiB: over the 1 MiB budget
	h.Do("PUT", "/projects/p/boxes/large", map[string]any{"card_ids": idsOf(largeIDs)}).Want(t, http.StatusOK)
	h.Do("PUT", "/projects/p/boxes/small", map[string]any{"card_ids": []string{"small"}}).Want(t, http.StatusOK)
	// A box over the budget is only made by appends that do not answer it.
	h.Do("PUT", "/projects/p/boxes/huge", map[string]any{"card_ids": idsOf(largeIDs)}).Want(t, http.StatusOK)
	h.Do("POST", "/projects/p/boxes/huge/append", map[string]any{"card_ids": idsOf(hugeIDs - largeIDs)}).Want(t, http.StatusOK)

	refused := func(method, path string, body any) {
		t.Helper()
		r := h.Do(method, path, body)
		if r.Status != http.StatusServiceUnavailable {
			t.Errorf("%s %s: %d, want 503: %.200s", method, path, r.Status, r.Body)
			return
		}
		if e := r.APIError(t); r.Header.Get("Retry-After") != "1" || e.Kind != "UNAVAILABLE" || e.Details["needed_bytes"] == nil {
			t.Errorf("%s %s: %+v, Retry-After %q", method, path, e, r.Header.Get("Retry-After"))
		}
	}
	length := func(box string) int {
		t.Helper()
		var b boxBody
		h.Do("GET", "/projects/p/boxes/"+box, nil).Want(t, http.StatusOK).JSON(t, &b)
		return len(b.CardIDs)
	}
	appendOne := map[string]any{"card_ids": []string{long}}

	t.Run("spent budget", func(t *testing.T) {
		if err := budget.Acquire(context.Background(), "p", budget.Total()); err != nil {
			t.Fatal(err)
		}
		refused("GET", "/projects/p/boxes/large", nil)
		refused("PUT", "/projects/p/boxes/large2", map[string]any{"card_ids": idsOf(largeIDs)})
		refused("POST", "/projects/p/boxes", map[string]any{"card_ids": idsOf(largeIDs)})
		refused("POST", "/projects/p/boxes/large/append?return=box", appendOne)
		// Small answers are not charged.
		h.Do("GET", "/projects/p/boxes/small", nil).Want(t, http.StatusOK)
		h.Do("POST", "/projects/p/boxes/small/append?return=box", map[string]any{"card_ids": []string{"small"}}).Want(t, http.StatusOK)
		budget.Release("p", budget.Total())

		h.Do("GET", "/projects/p/boxes/large2", nil).Want(t, http.StatusNotFound) // the refused PUT wrote nothing
		if n := length("large"); n != largeIDs {
			t.Errorf("large holds %d ids after a refused append, want %d", n, largeIDs)
		}
		h.Do("PUT", "/projects/p/boxes/large2", map[string]any{"card_ids": idsOf(largeIDs)}).Want(t, http.StatusOK)
		h.Do("POST", "/projects/p/boxes", map[string]any{"card_ids": idsOf(largeIDs)}).Want(t, http.StatusCreated)
		var b boxBody
		h.Do("POST", "/projects/p/boxes/large/append?return=box", appendOne).Want(t, http.StatusOK).JSON(t, &b)
		if len(b.CardIDs) != largeIDs+1 {
			t.Errorf("append?return=box answered %d ids, want %d", len(b.CardIDs), largeIDs+1)
		}
		waitfor.Soon(t, "the answers' bytes released once sent", func() bool { return budget.Held() == 0 })
	})

	t.Run("over the share", func(t *testing.T) {
		refused("GET", "/projects/p/boxes/huge", nil)
		refused("POST", "/projects/p/boxes/huge/append?return=box", appendOne)
		refused("PUT", "/projects/p/boxes/huge2", map[string]any{"card_ids": idsOf(hugeIDs)})
		refused("POST", "/projects/p/boxes", map[string]any{"card_ids": idsOf(hugeIDs)})
		h.Do("GET", "/projects/p/boxes/huge2", nil).Want(t, http.StatusNotFound)
		var page []map[string]any
		h.Do("GET", "/projects/p/boxes/huge/cards?limit=1", nil).Want(t, http.StatusOK).JSON(t, &page)
		if held := budget.Held(); held != 0 {
			t.Fatalf("%d bytes held after the refusals, want 0", held)
		}
	})
}
