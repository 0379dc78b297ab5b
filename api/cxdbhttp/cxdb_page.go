package cxdbhttp

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api/internal/answers"
	"github.com/cardboxhq/cardbox/cxdbcompat/turnpage"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// charge starts what a request of tenant t holds of the answer budget;
// the caller releases it once the answer is sent.
func (r *Routes) charge(c echo.Context, t ident.Tenant) *answers.Charge {
	return answers.NewCharge(c.Request().Context(), r.answers, r.answerWait, t.ID)
}

// writeTurnsPage writes a turn page as it lies in memory, its turns one
// after the other, without copying them into one body: the page is up to
// service.MaxPageBytes.
func writeTurnsPage(c echo.Context, p *turnpage.Page, charge *answers.Charge) error {
	head, err := turnsHead(p)
	if err != nil {
		return err
	}
	head = append(head[:len(head)-1], `,"turns":[`...)
	size := len(head) + len("]}")
	for i, t := range p.Turns {
		size += len(t)
		if i > 0 {
			size++
		}
	}
	charge.Settle(int64(size))
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	res.Header().Set(echo.HeaderContentLength, strconv.Itoa(size))
	res.WriteHeader(http.StatusOK)
	if _, err := res.Write(head); err != nil {
		return err
	}
	for i, t := range p.Turns {
		if i > 0 {
			if _, err := res.Write([]byte{','}); err != nil {
				return err
			}
		}
		if _, err := res.Write(t); err != nil {
			return err
		}
	}
	_, err = res.Write([]byte("]}"))
	return err
}

// turnsHead is the page's object without its turns.
func turnsHead(p *turnpage.Page) ([]byte, error) {
	out := turnsJSON{
		Meta: turnsMeta{
			ContextID: idString(p.Context.ContextID), HeadTurnID: idString(p.Context.TurnID), HeadDepth: p.Context.Depth,
		},
	}
	if p.BundleID != "" {
		out.Meta.RegistryBundleID = &p.BundleID
	}
	if len(p.Turns) > 0 {
		s := idString(p.Oldest)
		out.NextBeforeTurnID = &s
		if p.HasOlder {
			out.NextCursor = encodeTurnCursor('o', p.Oldest)
		}
		if p.HasNewer {
			out.PrevCursor = encodeTurnCursor('n', p.Newest)
		}
	}
	return json.Marshal(out)
}
