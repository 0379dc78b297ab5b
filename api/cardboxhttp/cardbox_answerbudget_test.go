package cardboxhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/internal/membudget"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// Card reads are charged to the answer budget as the CXDB lists are
// (docs/cardbox.md, "Answer bounds"): card by card, or box by box, before
// each is read, until the answer is sent.

const bigCardBytes = 512 << 10

// bigCards writes n cards of bigCardBytes of content, big0..big<n-1>, and
// boxes of two of them each, box0..box<n/2-1>, plus "all" holding every
// one.
func bigCards(t *testing.T, h *apitest.CardBox, project string, n int) []string {
	t.Helper()
	var cardIDs []string
	for i := range n {
		id := fmt.Sprintf("big%d", i)
		h.AddCards(project, apitest.Card(id, "task.instruction", fmt.Sprintf("%02d ", i)+strings.Repeat("x", bigCardBytes)))
		cardIDs = append(cardIDs, id)
	}
	for i := 0; i+1 < n; i += 2 {
		h.Do("PUT", fmt.Sprintf("/projects/%s/boxes/box%d", project, i/2), map[string]any{"card_ids": cardIDs[i : i+2]}).Want(t, http.StatusOK)
	}
	h.Do("PUT", "/projects/"+project+"/boxes/all", map[string]any{"card_ids": cardIDs}).Want(t, http.StatusOK)
	return cardIDs
}

type boundedBatch struct {
	Cards        []map[string]any
	MissingIDs   []string `json:"missing_ids"`
	RemainingIDs []string `json:"remaining_ids"`
}

type boundedBoxes struct {
	Boxes           []boxBody
	MissingBoxIDs   []string `json:"missing_box_ids"`
	MissingCardIDs  []string `json:"missing_card_ids"`
	RemainingBoxIDs []string `json:"remaining_box_ids"`
}

func TestCardReadsAreChargedToTheAnswerBudget(t *testing.T) {
	const (
		cards      = 6
		budgetSize = 5 * bigCardBytes / 2 // two cards, not three
		perAnswer  = 2
	)
	budget := membudget.New(budgetSize, 0, 0)
	h := apitest.NewBudgetCardBox(t, budget, time.Minute)
	cardIDs := bigCards(t, h, "p", cards)

	// Twice: the first reads the cards from Postgres, the second from the
	// card cache.
	for _, pass := range []string{"uncached", "cached"} {
		t.Run("a batch over the budget answers what fits and names the rest, "+pass, func(t *testing.T) {
			w := apitest.WatchHeld(t, budget)
			var got []string
			for ask, rounds := cardIDs, 0; len(ask) > 0; rounds++ {
				if rounds == cards {
					t.Fatalf("still %v to read after %d rounds", ask, rounds)
				}
				var res boundedBatch
				h.Do("POST", "/projects/p/cards/batch", map[string]any{"card_ids": ask}).Want(t, http.StatusOK).JSON(t, &res)
				if len(res.Cards) != min(perAnswer, len(ask)) || len(res.MissingIDs) != 0 {
					t.Fatalf("asked %v: %d cards, missing %v; want the %d the budget holds", ask, len(res.Cards), res.MissingIDs, perAnswer)
				}
				got = append(got, apitest.IDs(res.Cards)...)
				if want := ask[len(res.Cards):]; !slices.Equal(res.RemainingIDs, want) {
					t.Fatalf("asked %v: remaining %v, want %v", ask, res.RemainingIDs, want)
				}
				ask = res.RemainingIDs
			}
			if !slices.Equal(got, cardIDs) {
				t.Fatalf("read %v, want %v", got, cardIDs)
			}
			// That each answer holds no more than the budget is checked by
			// its cards; the watch, which may miss a short charge, only
			// checks that nothing held more.
			if most := w.Most(); most > budgetSize {
				t.Fatalf("the reads held at most %d bytes of the budget, want at most %d", most, budgetSize)
			}
			waitfor.Soon(t, "the answers' bytes released once sent", func() bool { return budget.Held() == 0 })
		})
	}

	t.Run("a box's page ends at the budget and its cursor reads on", func(t *testing.T) {
		var got []string
		path := "/projects/p/boxes/all/cards?limit=500"
		for pages := 0; ; pages++ {
			if pages == cards {
				t.Fatalf("still paging after %d pages", pages)
			}
			res := h.Do("GET", path, nil).Want(t, http.StatusOK)
			var page []map[string]any
			res.JSON(t, &page)
			if len(page) != perAnswer {
				t.Fatalf("page %d: %d cards, want the %d the budget holds", pages, len(page), perAnswer)
			}
			got = append(apitest.IDs(page), got...)
			cursor := res.Header.Get("X-Next-Cursor")
			if cursor == "" {
				break
			}
			path = "/projects/p/boxes/all/cards?limit=500&cursor=" + cursor
		}
		if !slices.Equal(got, cardIDs) {
			t.Fatalf("paged %v, want %v", got, cardIDs)
		}
	})

	t.Run("a hydrating box batch answers the boxes that fit and names the rest", func(t *testing.T) {
		var res boundedBoxes
		h.Do("POST", "/projects/p/boxes/batch", map[string]any{
			"box_ids": []string{"box0", "nope", "box1", "box2"}, "hydrate": true,
		}).Want(t, http.StatusOK).JSON(t, &res)
		if len(res.Boxes) != 1 || res.Boxes[0].BoxID != "box0" || len(res.Boxes[0].HydratedCards) != 2 {
			t.Fatalf("boxes %+v, want box0 with its 2 cards", res.Boxes)
		}
		if !slices.Equal(res.RemainingBoxIDs, []string{"box1", "box2"}) || !slices.Equal(res.MissingBoxIDs, []string{"nope"}) {
			t.Fatalf("remaining %v, missing %v; want box1 and box2 remaining, nope missing", res.RemainingBoxIDs, res.MissingBoxIDs)
		}
	})

	t.Run("concurrent reads share it and all answer", func(t *testing.T) {
		w := apitest.WatchHeld(t, budget)
		type read struct {
			method, path string
			body         any
		}
		batch := read{"POST", "/projects/p/cards/batch", map[string]any{"card_ids": cardIDs}}
		page := read{"GET", "/projects/p/boxes/all/cards?limit=500", nil}
		boxes := read{"POST", "/projects/p/boxes/batch", map[string]any{"box_ids": []string{"box0", "box1", "box2"}, "hydrate": true}}
		reads := []read{batch, page, boxes, batch, page, boxes}
		errs := make(chan error, len(reads))
		var wg sync.WaitGroup
		for _, rd := range reads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := h.Try(rd.method, rd.path, rd.body, http.StatusOK)
				if err == nil && len(res.Body) > budgetSize {
					err = fmt.Errorf("%s %s: %d bytes, over the %d-byte budget", rd.method, rd.path, len(res.Body), budgetSize)
				}
				if err == nil && len(res.Body) < bigCardBytes {
					err = fmt.Errorf("%s %s: %d bytes, not even a card", rd.method, rd.path, len(res.Body))
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		most := w.Most()
		t.Logf("%d reads at once held at most %d bytes of a %d-byte budget", len(reads), most, budgetSize)
		if most > budgetSize {
			t.Fatalf("held at most %d bytes, want at most the budget's %d", most, budgetSize)
		}
		waitfor.Soon(t, "the answers' bytes released once sent", func() bool { return budget.Held() == 0 })
	})
}

// TestSpentAnswerBudgetRefusesCardReads: with the budget spent (by binary
// answers, say), a read of a large card is 503 with Retry-After, on every
// route that answers cards; a small one is not charged and answers. A
// card larger than the budget is 503 however long the read may wait.
func TestSpentAnswerBudgetRefusesCardReads(t *testing.T) {
	budget := membudget.New(1<<20, 0, 0)
	h := apitest.NewBudgetCardBox(t, budget, 50*time.Millisecond)
	h.AddCards("p", apitest.Card("large", "task.instruction", strings.Repeat("x", 100<<10))) // over the 64 KiB not charged
	h.AddCards("p", apitest.Card("small", "task.instruction", "small"))
	h.AddCards("p", apitest.Card("huge", "task.instruction", strings.Repeat("x", 2<<20)))
	for _, id := range []string{"large", "small", "huge"} {
		h.Do("PUT", "/projects/p/boxes/"+id, map[string]any{"card_ids": []string{id}}).Want(t, http.StatusOK)
	}
	reads := func(id string) [][3]any {
		return [][3]any{
			{"POST", "/projects/p/cards/batch", map[string]any{"card_ids": []string{id}}},
			{"GET", "/projects/p/cards/" + id, nil},
			{"GET", "/projects/p/boxes/" + id + "/cards", nil},
			{"POST", "/projects/p/boxes/batch", map[string]any{"box_ids": []string{id}, "hydrate": true}},
		}
	}
	refused := func(id string) {
		t.Helper()
		for _, rd := range reads(id) {
			r := h.Do(rd[0].(string), rd[1].(string), rd[2])
			if r.Status != http.StatusServiceUnavailable {
				t.Errorf("%s %s of %q: %d, want 503: %.200s", rd[0], rd[1], id, r.Status, r.Body)
				continue
			}
			if e := r.APIError(t); r.Header.Get("Retry-After") != "1" || e.Kind != "UNAVAILABLE" || e.Details["needed_bytes"] == nil {
				t.Errorf("%s %s of %q: %+v, Retry-After %q", rd[0], rd[1], id, e, r.Header.Get("Retry-After"))
			}
		}
	}
	answered := func(id string) {
		t.Helper()
		for _, rd := range reads(id) {
			h.Do(rd[0].(string), rd[1].(string), rd[2]).Want(t, http.StatusOK)
		}
	}

	if err := budget.Acquire(context.Background(), "p", budget.Total()); err != nil {
		t.Fatal(err)
	}
	refused("large")
	answered("small")
	budget.Release("p", budget.Total())
	answered("large")
	refused("huge")
	if held := budget.Held(); held != 0 {
		t.Fatalf("%d bytes held after the reads, want 0", held)
	}
}
