// Package cardboxhttp serves the CardBox REST API (/projects/...): cards,
// boxes, their batch reads and appends, context assembly over boxes
// (entries, snapshots, derived boxes, token-budgeted windows) and the
// OpenAPI document. Package api is the server it is registered on.
package cardboxhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api/internal/jsonbody"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/answer"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/docs"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/membudget"
)

// NextCursorHeader carries the cursor of the next (older) page of
// GET /projects/{project_id}/boxes/{box_id}/cards; it is absent on the last
// page.
const NextCursorHeader = "X-Next-Cursor"

// Routes serves the CardBox REST API and its OpenAPI document.
type Routes struct {
	svc        *cardbox.Service
	answers    *membudget.Budget
	answerWait time.Duration
}

// New returns the CardBox routes over svc, with an answer budget of
// their own (NewWith gives them a shared one). Pass it in
// api.Options.Routes; api.New also installs its error mapper (MapError).
func New(svc *cardbox.Service) *Routes {
	return NewWith(svc, Options{})
}

// Register adds the CardBox routes and GET /openapi.yaml.
func (r *Routes) Register(e *echo.Echo) {
	e.GET("/openapi.yaml", serveOpenAPI)
	p := e.Group("/projects/:project_id")
	p.POST("/cards", r.addCards)
	p.POST("/cards/batch", r.cardsBatch)
	p.GET("/cards/:card_id", r.getCard)
	p.DELETE("/cards/:card_id", r.deleteCard)
	p.POST("/boxes", r.createBox)
	p.POST("/boxes/batch", r.boxesBatch)
	p.GET("/boxes/:box_id", r.getBox)
	p.PUT("/boxes/:box_id", r.saveBox)
	p.DELETE("/boxes/:box_id", r.deleteBox)
	p.GET("/boxes/:box_id/cards", r.boxCards)
	p.POST("/boxes/:box_id/append", r.appendToBox)
}

// MapError gives cardbox's errors their kinds: the package's MapError.
func (r *Routes) MapError(err error) *fault.Error { return MapError(err) }

// MapError gives the cardbox package's errors their kinds: invalid
// input fault.Invalid (400), not found fault.NotFound (404), a changed
// immutable card fault.Conflict (409), unknown card ids in a box write
// fault.Unprocessable (422); the message is the error's whole text. It
// returns nil for other errors; Postgres's own (unavailable 503, a full
// disk 507) take their kinds in fault.From.
func MapError(err error) *fault.Error {
	var (
		ve *rules.ValidationError
		ce *rules.ConflictError
		ue *rules.UnknownCardsError
	)
	switch {
	case errors.As(err, &ve):
		return fault.New(fault.Invalid, "%s", ve).With("field", ve.Field)
	case errors.As(err, &ce):
		return fault.New(fault.Conflict, "%s", ce).With("card_ids", ce.CardIDs)
	case errors.As(err, &ue):
		return fault.New(fault.Unprocessable, "%s", ue).With("card_ids", ue.CardIDs)
	case errors.Is(err, rules.ErrNotFound):
		return fault.New(fault.NotFound, "%s", err)
	case errors.Is(err, rules.ErrInvalid):
		return fault.New(fault.Invalid, "%s", err)
	case errors.Is(err, rules.ErrConflict):
		return fault.New(fault.Conflict, "%s", err)
	case errors.Is(err, rules.ErrUnknownCard):
		return fault.New(fault.Unprocessable, "%s", err)
	}
	return nil
}

func serveOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", docs.OpenAPI)
}

// param returns a path parameter, percent-decoded.
func param(c echo.Context, name string) (string, error) {
	v := c.Param(name)
	if c.Request().URL.RawPath == "" {
		return v, nil
	}
	u, err := url.PathUnescape(v)
	if err != nil {
		return "", fault.New(fault.Invalid, "path parameter %s: %v", name, err)
	}
	return u, nil
}

// params returns the project id and one more path parameter.
func params(c echo.Context, name string) (project, id string, err error) {
	if project, err = param(c, "project_id"); err != nil {
		return "", "", err
	}
	id, err = param(c, name)
	return project, id, err
}

// boxParams returns the project id, the box id and one more path
// parameter (an entry's, a snapshot's).
func boxParams(c echo.Context, name string) (project, box, id string, err error) {
	if project, box, err = params(c, "box_id"); err != nil {
		return "", "", "", err
	}
	id, err = param(c, name)
	return project, box, id, err
}

// projectAndBody returns the project id and the request's JSON body: what
// a write to a project reads first.
func projectAndBody[T any](c echo.Context) (project string, body T, err error) {
	if project, err = param(c, "project_id"); err != nil {
		return "", body, err
	}
	err = jsonbody.Decode(c, &body)
	return project, body, err
}

// pathAndBody returns the project id, one more path parameter and the
// request's JSON body: what a write to a card or a box reads first.
func pathAndBody[T any](c echo.Context, name string) (project, id string, body T, err error) {
	if project, id, err = params(c, name); err != nil {
		return "", "", body, err
	}
	err = jsonbody.Decode(c, &body)
	return project, id, body, err
}

func (r *Routes) addCards(c echo.Context) error {
	project, req, err := projectAndBody[addCardsRequest](c)
	if err != nil {
		return err
	}
	inputs := []cardInput{req.cardInput}
	if req.Cards != nil {
		inputs = *req.Cards
	}
	stored, err := r.addInputs(c, project, inputs)
	if err != nil && req.Cards == nil {
		return bareCardError(err)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, addCardsResponse{Cards: stored})
}

func (r *Routes) addInputs(c echo.Context, project string, inputs []cardInput) ([]cardbox.Card, error) {
	cards := make([]cardbox.NewCard, len(inputs))
	for i, in := range inputs {
		if in.Meta != nil {
			return nil, &rules.ValidationError{
				Field: fmt.Sprintf("cards[%d].meta", i), Reason: "is not supported; use metadata",
			}
		}
		cards[i] = in.toNewCard()
	}
	return r.svc.AddCards(c.Request().Context(), project, cards)
}

// bareCardError names the fields of a bare card as the client sent them:
// "metadata", not "cards[0].metadata".
func bareCardError(err error) error {
	var ve *rules.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	field, ok := strings.CutPrefix(ve.Field, "cards[0].")
	if !ok {
		return err
	}
	return &rules.ValidationError{Field: field, Reason: ve.Reason}
}

func (r *Routes) cardsBatch(c echo.Context) error {
	project, req, err := projectAndBody[cardsBatchRequest](c)
	if err != nil {
		return err
	}
	charge := r.charge(c, project)
	defer charge.Release()
	if err := reserveFrame(charge, req.CardIDs); err != nil {
		return err
	}
	res, err := r.svc.GetCardsJSONWithin(c.Request().Context(), project, req.CardIDs, room(charge))
	if err != nil {
		return err
	}
	return writeBoundedCards(c, charge, res)
}

func (r *Routes) getCard(c echo.Context) error {
	project, id, err := params(c, "card_id")
	if err != nil {
		return err
	}
	charge := r.charge(c, project)
	defer charge.Release()
	if err := reserveFrame(charge, nil); err != nil {
		return err
	}
	card, err := r.svc.GetCardJSONWithin(c.Request().Context(), project, id, room(charge))
	if err != nil {
		return err
	}
	return sendChargedCards(c, charge, len(card), func(b []byte) ([]byte, error) { return append(b, card...), nil })
}

func (r *Routes) deleteCard(c echo.Context) error {
	project, id, err := params(c, "card_id")
	if err != nil {
		return err
	}
	if err := r.svc.DeleteCard(c.Request().Context(), project, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (r *Routes) createBox(c echo.Context) error {
	project, req, err := projectAndBody[boxRequest](c)
	if err != nil {
		return err
	}
	in := req.input()
	return r.writeAndAnswerBox(c, http.StatusCreated, project, "", in, func(ctx context.Context) (cardbox.Box, error) {
		return r.svc.CreateBox(ctx, project, in)
	})
}

func (r *Routes) saveBox(c echo.Context) error {
	project, id, req, err := pathAndBody[boxRequest](c, "box_id")
	if err != nil {
		return err
	}
	in := req.input()
	return r.writeAndAnswerBox(c, http.StatusOK, project, id, in, func(ctx context.Context) (cardbox.Box, error) {
		return r.svc.SaveBox(ctx, project, id, in)
	})
}

// writeAndAnswerBox writes box id of project (id "" for one the write names) with
// write, and answers the box with status. The answer is charged before
// the write, so that a refusal leaves nothing written.
func (r *Routes) writeAndAnswerBox(c echo.Context, status int, project, id string, in cardbox.BoxInput,
	write func(context.Context) (cardbox.Box, error)) error {
	charge := r.charge(c, project)
	defer charge.Release()
	if err := charge.Reserve(answer.BoxInputJSONSize(project, id, in.CardIDs, in.ParentIDs, in.Metadata)); err != nil {
		return err
	}
	box, err := write(c.Request().Context())
	if err != nil {
		return err
	}
	return writeBox(c, status, charge, box)
}

func (req boxRequest) input() cardbox.BoxInput {
	return cardbox.BoxInput{CardIDs: req.CardIDs, ParentIDs: req.ParentIDs, Metadata: req.Metadata}
}

func (r *Routes) getBox(c echo.Context) error {
	project, id, err := params(c, "box_id")
	if err != nil {
		return err
	}
	charge := r.charge(c, project)
	defer charge.Release()
	box, err := r.svc.LoadBoxWithin(c.Request().Context(), project, id, room(charge))
	if err != nil {
		return err
	}
	return writeBox(c, http.StatusOK, charge, box)
}

func (r *Routes) deleteBox(c echo.Context) error {
	project, id, err := params(c, "box_id")
	if err != nil {
		return err
	}
	if err := r.svc.DeleteBox(c.Request().Context(), project, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (r *Routes) appendToBox(c echo.Context) error {
	project, id, req, err := pathAndBody[appendRequest](c, "box_id")
	if err != nil {
		return err
	}
	ret := c.QueryParam("return")
	if ret != "" && ret != "box" {
		return fault.New(fault.Invalid, `return=%q: the only value is "box" (answer the whole box)`, ret)
	}
	ctx := c.Request().Context()
	// The box answered is charged before the append, at its size and the
	// ids appended, so that a refusal leaves nothing appended.
	charge := r.charge(c, project)
	defer charge.Release()
	if ret == "box" {
		size, live, err := r.svc.BoxJSONSize(ctx, project, id)
		if err != nil {
			return err
		}
		if live {
			if err := charge.Reserve(answer.AppendedBoxJSONSize(size, req.CardIDs)); err != nil {
				return err
			}
		}
	}
	appended, err := r.svc.AppendToBox(ctx, project, id, req.CardIDs)
	if err != nil {
		return err
	}
	if ret == "" {
		return c.JSON(http.StatusOK, renderAppended(appended))
	}
	box, err := r.svc.LoadBox(ctx, project, id)
	if err != nil {
		return err
	}
	return writeBox(c, http.StatusOK, charge, box)
}

func (r *Routes) boxesBatch(c echo.Context) error {
	project, req, err := projectAndBody[boxesBatchRequest](c)
	if err != nil {
		return err
	}
	limit := cardbox.DefaultCardsLimit
	if req.Limit != nil {
		limit = *req.Limit
	}
	charge := r.charge(c, project)
	defer charge.Release()
	if err := reserveFrame(charge, req.BoxIDs); err != nil {
		return err
	}
	res, err := r.svc.GetBoxesJSONWithin(c.Request().Context(), project, cardbox.BoxesQuery{
		BoxIDs: req.BoxIDs, Hydrate: req.Hydrate, Limit: limit,
	}, room(charge))
	if err != nil {
		return err
	}
	return writeBoxesBatch(c, charge, res, req.Hydrate)
}

func (r *Routes) boxCards(c echo.Context) error {
	project, id, err := params(c, "box_id")
	if err != nil {
		return err
	}
	limit := cardbox.DefaultCardsLimit
	if s := c.QueryParam("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil {
			return fault.New(fault.Invalid, "query parameter \"limit\": %q is not an integer", s)
		}
	}
	charge := r.charge(c, project)
	defer charge.Release()
	if err := reserveFrame(charge, nil); err != nil {
		return err
	}
	page, err := r.svc.BoxCardsJSONWithin(c.Request().Context(), project, id, limit, c.QueryParam("cursor"), room(charge))
	if err != nil {
		return err
	}
	return writeBoxCardsPage(c, charge, page)
}
