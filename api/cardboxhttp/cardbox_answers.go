package cardboxhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api/internal/answers"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/answer"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/appendjson"
	"github.com/cardboxhq/cardbox/internal/membudget"
)

// Card reads (a card, batch reads of cards and boxes, a box's card pages)
// are charged to the answer budget as the CXDB lists are: each card or
// box is measured before it is loaded and charged in answer order, until
// the answer is sent. An answer holding nothing of the budget waits for
// room (503 with Retry-After after the wait); one holding some takes more
// only if there is room now, else it ends before the entry: a batch read
// names the rest in remaining_ids or remaining_box_ids, a page starts
// later and its X-Next-Cursor reads the rest. An entry over the tenant's
// share is 503 when it would be the answer's first.

// Options configure the CardBox routes.
type Options struct {
	// Answers is the memory budget card reads are charged to while built
	// and sent: the binary server's (server.Server.ReplyBudget), as the
	// CXDB routes', so that every surface shares it. Nil gives the routes
	// a 64 MiB budget of their own.
	Answers *membudget.Budget
	// AnswerWait is how long a read holding nothing of Answers waits for
	// room before it is refused 503 with Retry-After (default 5 s).
	AnswerWait time.Duration
}

// NewWith returns the CardBox routes over svc with opts.
func NewWith(svc *cardbox.Service, opts Options) *Routes {
	if opts.Answers == nil {
		opts.Answers = membudget.New(answers.DefaultBudget, 0, 0)
	}
	if opts.AnswerWait <= 0 {
		opts.AnswerWait = answers.DefaultWait
	}
	return &Routes{svc: svc, answers: opts.Answers, answerWait: opts.AnswerWait}
}

// charge starts what a read of project holds of the answer budget; the
// caller releases it once the answer is sent.
func (r *Routes) charge(c echo.Context, project string) *answers.Charge {
	return answers.NewCharge(c.Request().Context(), r.answers, r.answerWait, project)
}

// room is a answer.Room over a charge: each entry charged as a CXDB
// list's (ReserveEntry).
func room(a *answers.Charge) answer.Room {
	return func(n int64) error {
		err := a.ReserveEntry(n)
		if errors.Is(err, service.ErrAnswerFull) {
			return fmt.Errorf("%w: %w", answer.ErrAnswerFull, err)
		}
		return err
	}
}

// reserveFrame charges what an answer holds besides its entries (its
// brackets, the ids it lists as missing or remaining: at most each of ids
// once), before its entries are read, so that the answer never needs
// more once it holds some.
func reserveFrame(a *answers.Charge, ids []string) error {
	n := int64(128)
	for _, id := range ids {
		n += int64(answers.StringLen(id)) + 1
	}
	return a.Reserve(n)
}

// sendChargedCards writes the answer that render appends to an empty
// buffer of at least size bytes, its charge settled to its size while it
// is sent. Its entries and frame were charged before they were read; an
// answer larger still (a box replaced between its measure and its read)
// is charged the difference, or refused.
func sendChargedCards(c echo.Context, charge *answers.Charge, size int, render func(b []byte) ([]byte, error)) error {
	return sendCharged(c, http.StatusOK, charge, size, render)
}

// sendCharged is sendChargedCards answering status.
func sendCharged(c echo.Context, status int, charge *answers.Charge, size int, render func(b []byte) ([]byte, error)) error {
	buf := bodyPool.Get().(*[]byte)
	defer func() {
		// net/http has copied or sent the body when Write returns.
		if cap(*buf) <= maxPooledBody {
			bodyPool.Put(buf)
		}
	}()
	if cap(*buf) < size {
		*buf = make([]byte, 0, size)
	}
	out, err := render((*buf)[:0])
	if err != nil {
		return err
	}
	*buf = out
	if extra := int64(len(out)) - charge.Total(); extra > 0 {
		if err := charge.ReserveEntry(extra); err != nil {
			return err
		}
	}
	charge.Settle(int64(len(out)))
	return sendJSON(c, status, out)
}

// writeBox answers one box, charged before it was loaded (or, for a
// write, before it was written), as encoding/json writes it and echo's
// c.JSON a newline after it.
func writeBox(c echo.Context, status int, charge *answers.Charge, box cardbox.Box) error {
	return sendCharged(c, status, charge, int(charge.Total()), func(b []byte) ([]byte, error) {
		js, err := json.Marshal(renderBox(box))
		if err != nil {
			return nil, err
		}
		return append(append(b, js...), '\n'), nil
	})
}

// boundedCardsBody appends {"cards": [...], "missing_ids": [...],
// "remaining_ids": [...]}.
func boundedCardsBody(b []byte, res cardbox.BoundedCardsJSON) []byte {
	b = cardsBatchBody(b, res.CardsJSON)
	b = append(b[:len(b)-1], `,"remaining_ids":`...)
	b = appendjson.Strings(b, res.RemainingIDs)
	return append(b, '}')
}

// boundedCardsSize is at least the size of boundedCardsBody.
func boundedCardsSize(res cardbox.BoundedCardsJSON) int {
	return cardsBatchSize(res.CardsJSON) + 32 + len(res.RemainingIDs)*(rules.MaxIDLength*6+3)
}

// boxesBatchBody appends a batch box read's answer as encoding/json
// writes boxesBatchResponse (and echo's c.JSON a newline after it),
// splicing each box's hydrated cards in rather than copying them through
// encoding/json.
func boxesBatchBody(b []byte, res cardbox.BoundedBoxesJSON, hydrate bool) ([]byte, error) {
	b = append(b, `{"boxes":[`...)
	for i, box := range res.Boxes {
		if i > 0 {
			b = append(b, ',')
		}
		head, err := json.Marshal(renderBox(box.Box))
		if err != nil {
			return nil, err
		}
		if !hydrate {
			b = append(b, head...)
			continue
		}
		b = append(b, head[:len(head)-1]...)
		b = append(b, `,"hydrated_cards":`...)
		b = appendjson.RawList(b, box.Cards)
		b = append(b, '}')
	}
	b = append(b, `],"missing_box_ids":`...)
	b = appendjson.Strings(b, res.MissingBoxIDs)
	b = append(b, `,"missing_card_ids":`...)
	b = appendjson.Strings(b, res.MissingCardIDs)
	b = append(b, `,"remaining_box_ids":`...)
	b = appendjson.Strings(b, res.RemainingBoxIDs)
	return append(b, "}\n"...), nil
}

// writeBoxesBatch answers a batch box read, charged.
func writeBoxesBatch(c echo.Context, charge *answers.Charge, res cardbox.BoundedBoxesJSON, hydrate bool) error {
	return sendChargedCards(c, charge, int(charge.Total()), func(b []byte) ([]byte, error) {
		return boxesBatchBody(b, res, hydrate)
	})
}

// writeBoundedCards answers a batch card read, charged.
func writeBoundedCards(c echo.Context, charge *answers.Charge, res cardbox.BoundedCardsJSON) error {
	return sendChargedCards(c, charge, boundedCardsSize(res), func(b []byte) ([]byte, error) {
		return boundedCardsBody(b, res), nil
	})
}

// writeBoxCardsPage answers a page of a box's cards, charged.
func writeBoxCardsPage(c echo.Context, charge *answers.Charge, page cardbox.CardPageJSON) error {
	if page.NextCursor != "" {
		c.Response().Header().Set(NextCursorHeader, page.NextCursor)
	}
	return sendChargedCards(c, charge, appendjson.RawListLen(page.Cards), func(b []byte) ([]byte, error) {
		return appendjson.RawList(b, page.Cards), nil
	})
}
