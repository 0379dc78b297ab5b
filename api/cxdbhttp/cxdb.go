// Package cxdbhttp serves the CXDB HTTP API (/v1) over the CXDB service:
// contexts, turns, the type registry, blobs, fs trees, live events and
// metrics. It decodes requests, calls cxdbcompat/service and encodes its
// answers; package api is the server the routes are registered on.
package cxdbhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/internal/answers"
	"github.com/cardboxhq/cardbox/api/internal/jsonbody"
	"github.com/cardboxhq/cardbox/cxdbcompat/cql"
	"github.com/cardboxhq/cardbox/cxdbcompat/projection"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/cxdbcompat/turnpage"
	"github.com/cardboxhq/cardbox/cxdbcompat/typedjson"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/membudget"
)

// Routes serve the CXDB HTTP API (/v1) over the CXDB service.
type Routes struct {
	svc   *service.Service
	pages *turnpage.Pages
	// stop ends live event streams at shutdown (they would hold it).
	stop      <-chan struct{}
	heartbeat time.Duration
	metrics   *cxdbMetrics
	// answers is what large answers are charged to (see api/internal/answers).
	answers    *membudget.Budget
	answerWait time.Duration
}

// Options configure the CXDB routes.
type Options struct {
	// Stop, when closed, ends the event streams (server shutdown).
	Stop <-chan struct{}
	// Stats feeds GET /v1/metrics; nil serves zeros for the store's part.
	Stats StatsSource
	// DataDir is where disk usage is measured for GET /v1/metrics.
	DataDir string
	// Heartbeat is how often an idle event stream gets a comment line, and
	// (hosted mode) its key is checked again (default 15 s).
	Heartbeat time.Duration
	// Gatherer is the registry served at /metrics; GET /v1/metrics takes
	// its request counts and latencies from it. Nil reports zeros.
	Gatherer prometheus.Gatherer
	// Answers is the memory budget large answers (turn pages, blobs,
	// files) are charged to while built and sent: the binary server's
	// (server.Server.ReplyBudget), so that both surfaces share it. Nil
	// gives the routes a budget of their own of 64 MiB.
	Answers *membudget.Budget
	// AnswerWait is how long a request waits for room in Answers before
	// it is refused 503 with Retry-After (default 5 s).
	AnswerWait time.Duration
	// Pages renders the turn pages: the server's, whose rendered-turn
	// cache CardBox's derivation shares. Nil gives the routes their own.
	Pages *turnpage.Pages
}

// New returns the CXDB HTTP routes. Pass it in api.Options.Routes.
func New(svc *service.Service, opts Options) *Routes {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = heartbeatEvery
	}
	if opts.Answers == nil {
		opts.Answers = membudget.New(answers.DefaultBudget, 0, 0)
	}
	if opts.AnswerWait <= 0 {
		opts.AnswerWait = answers.DefaultWait
	}
	if opts.Pages == nil {
		opts.Pages = turnpage.New(svc, 0)
	}
	return &Routes{
		svc: svc, pages: opts.Pages, stop: opts.Stop, heartbeat: opts.Heartbeat, metrics: newCXDBMetrics(svc, opts),
		answers: opts.Answers, answerWait: opts.AnswerWait,
	}
}

// Register adds the /v1 routes.
func (r *Routes) Register(e *echo.Echo) {
	v := e.Group("/v1")
	v.GET("/contexts", r.listContexts)
	v.GET("/contexts/search", r.search)
	v.POST("/contexts/create", r.createContext)
	v.POST("/contexts/fork", r.forkContext)
	v.GET("/contexts/:id", r.getContext)
	v.GET("/contexts/:id/provenance", r.provenance)
	v.GET("/contexts/:id/turns", r.turns)
	v.POST("/contexts/:id/append", r.appendTurn)
	r.registerDeletion(v)
	v.PUT("/registry/bundles/:bundle_id", r.putBundle)
	v.GET("/registry/bundles/:bundle_id", r.getBundle)
	v.GET("/registry/types", r.listTypes)
	v.GET("/registry/types/:type_id/versions/:version", r.getTypeVersion)
	v.GET("/registry/renderers", r.renderers)
	v.GET("/blobs/:hash", r.getBlob)
	v.POST("/blobs/missing", r.missingBlobs)
	v.GET("/turns/:id/fs", r.fsList)
	v.GET("/turns/:id/fs/*", r.fsPath)
	v.GET("/events", r.events)
	v.GET("/metrics", r.metrics.serve)
}

// MapError maps the CXDB packages' errors: the package's MapError.
func (r *Routes) MapError(err error) *fault.Error { return MapError(err) }

// MapError gives the CXDB codecs' errors that are no *fault.Error their
// kind: data that does not fit its type is unprocessable (422). The
// service's and the registry's errors are *fault.Error values already. It
// returns nil for other errors.
func MapError(err error) *fault.Error {
	var fe *typedjson.FieldError
	if errors.As(err, &fe) {
		return fault.New(fault.Unprocessable, "%s", fe.Error()).With("field", fe.Path)
	}
	return nil
}

// tenant is the tenant a request acts for.
func (r *Routes) tenant(c echo.Context) (ident.Tenant, error) {
	return api.RequestTenant(c, r.svc.Tenant)
}

func (r *Routes) listContexts(c echo.Context) error {
	t, err := r.tenant(c)
	if err != nil {
		return err
	}
	q, err := contextQuery(c)
	if err != nil {
		return err
	}
	// The entries are charged as they are built, until the page is sent.
	charge := r.charge(c, t)
	defer charge.Release()
	q.Reserve, q.Borrow = charge.ReserveEntry, charge.Borrow
	list, err := r.svc.ListContexts(c.Request().Context(), t, q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

// contextQuery reads the listing's parameters. limit above the maximum is
// the maximum (the CXDB UI asks for 1000); the rest comes by cursor.
func contextQuery(c echo.Context) (service.ContextQuery, error) {
	limit, err := queryUint(c, "limit", 32, service.DefaultContextLimit)
	if err != nil {
		return service.ContextQuery{}, err
	}
	prov, err := queryBool(c, "include_provenance")
	if err != nil {
		return service.ContextQuery{}, err
	}
	q := service.ContextQuery{
		Limit: int(min(max(limit, 1), service.MaxContextLimit)), Cursor: c.QueryParam("cursor"),
		Labels: c.QueryParams()["label"], Title: c.QueryParam("title"), IncludeProvenance: prov,
	}
	if tags, ok := c.QueryParams()["tag"]; ok {
		q.Tag, q.HasTag = tags[0], true
	}
	if text := c.QueryParam("q"); text != "" {
		parsed, err := cql.Parse(text)
		if err != nil {
			return q, paramError("q", "%v", err)
		}
		q.Query = parsed
	}
	return q, nil
}

func (r *Routes) search(c echo.Context) error {
	text := c.QueryParam("q")
	if text == "" {
		return c.JSON(http.StatusBadRequest, map[string]string{"error": "Missing required 'q' parameter"})
	}
	limit, err := queryUint(c, "limit", 32, 0)
	if err != nil {
		return err
	}
	q, err := cql.Parse(text)
	if err != nil {
		return c.JSON(http.StatusBadRequest, err)
	}
	t, err := r.tenant(c)
	if err != nil {
		return err
	}
	start := time.Now()
	// As a list's: charged as built, until sent.
	charge := r.charge(c, t)
	defer charge.Release()
	found, err := r.svc.Search(c.Request().Context(), t, q, int(limit), service.Charge{Reserve: charge.ReserveEntry, Borrow: charge.Borrow})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{
		"contexts": found.Contexts, "total_count": found.Total, "truncated": found.Truncated,
		"elapsed_ms": time.Since(start).Milliseconds(), "query": text,
	})
}

func (r *Routes) getContext(c echo.Context) error {
	t, id, err := r.tenantAndID(c, "id")
	if err != nil {
		return err
	}
	e, err := r.svc.ContextEntry(c.Request().Context(), t, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

func (r *Routes) provenance(c echo.Context) error {
	t, id, err := r.tenantAndID(c, "id")
	if err != nil {
		return err
	}
	p, err := r.svc.Provenance(c.Request().Context(), t, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"context_id": idString(id), "provenance": p})
}

func (r *Routes) tenantAndID(c echo.Context, param string) (ident.Tenant, uint64, error) {
	id, err := idParam(c, param)
	if err != nil {
		return ident.Tenant{}, 0, err
	}
	t, err := r.tenant(c)
	return t, id, err
}

// createRequest is the body of POST /v1/contexts/create and /fork.
type createRequest struct {
	BaseTurnID jsonbody.ID `json:"base_turn_id"`
}

// headResponse answers create and fork.
type headResponse struct {
	ContextID  string `json:"context_id"`
	HeadTurnID string `json:"head_turn_id"`
	HeadDepth  uint32 `json:"head_depth"`
}

func (r *Routes) createContext(c echo.Context) error { return r.newContext(c, false) }
func (r *Routes) forkContext(c echo.Context) error   { return r.newContext(c, true) }

func (r *Routes) newContext(c echo.Context, fork bool) error {
	var req createRequest
	if err := jsonbody.DecodeStrict(c, &req, !fork); err != nil {
		return err
	}
	if fork && req.BaseTurnID == 0 {
		return fault.New(fault.Invalid, "base_turn_id: a fork needs the turn to fork from")
	}
	t, err := r.tenant(c)
	if err != nil {
		return err
	}
	h, err := r.svc.CreateContext(c.Request().Context(), t, uint64(req.BaseTurnID), "")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, headResponse{idString(h.ContextID), idString(h.TurnID), h.Depth})
}

// turnAppendRequest is the body of POST /v1/contexts/{id}/append.
type turnAppendRequest struct {
	TypeID         string          `json:"type_id"`
	TypeVersion    uint32          `json:"type_version"`
	Data           json.RawMessage `json:"data"`
	ParentTurnID   jsonbody.ID     `json:"parent_turn_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	// IfHead makes the append conditional: it commits only while this
	// turn ("0": none) is the context's head, else 409 HEAD_MOVED; the
	// new turn's parent is this turn.
	IfHead *jsonbody.ID `json:"if_head"`
}

func (r *Routes) appendTurn(c echo.Context) error {
	t, id, err := r.tenantAndID(c, "id")
	if err != nil {
		return err
	}
	var req turnAppendRequest
	if err := jsonbody.DecodeStrict(c, &req, false); err != nil {
		return err
	}
	if req.TypeID == "" {
		return paramError("type_id", "required")
	}
	a := service.JSONAppend{
		ContextID: id, ParentTurnID: uint64(req.ParentTurnID), TypeID: req.TypeID, TypeVersion: req.TypeVersion,
		Data: req.Data, IdempotencyKey: req.IdempotencyKey,
	}
	if req.IfHead != nil {
		if a.ParentTurnID != 0 && a.ParentTurnID != uint64(*req.IfHead) {
			return paramError("parent_turn_id", "must be if_head's turn when both are given")
		}
		a.ParentTurnID, a.IfHead = uint64(*req.IfHead), true
	}
	res, err := r.svc.AppendJSON(c.Request().Context(), t, a)
	if err != nil {
		return err
	}
	turn, _ := r.svc.TurnInfo(t, res.TurnID)
	return c.JSON(http.StatusCreated, map[string]any{
		"context_id": idString(res.ContextID), "turn_id": idString(res.TurnID), "parent_turn_id": idString(turn.ParentID),
		"depth": res.Depth, "content_hash_b3": fmt.Sprintf("%x", res.ContentHash[:]), "replayed": res.Replayed,
	})
}

func (r *Routes) turns(c echo.Context) error {
	t, id, err := r.tenantAndID(c, "id")
	if err != nil {
		return err
	}
	q, err := turnQuery(c)
	if err != nil {
		return err
	}
	// The page's bytes are charged from before they are rendered until
	// they are sent.
	charge := r.charge(c, t)
	defer charge.Release()
	q.Reserve = charge.Reserve
	page, err := r.pages.Turns(c.Request().Context(), t, id, q)
	if err != nil {
		return err
	}
	return writeTurnsPage(c, page, charge)
}

// turnQuery reads the turn page's parameters (spec section 4.5 plus
// cursors and type filters).
func turnQuery(c echo.Context) (service.TurnQuery, error) {
	var q service.TurnQuery
	var err error
	limit, err := queryUint(c, "limit", 32, service.DefaultTurnLimit)
	if err != nil {
		return q, err
	}
	q.Limit = uint32(limit)
	if q.Before, err = queryUint(c, "before_turn_id", 64, 0); err != nil {
		return q, err
	}
	if err := readCursor(c, &q); err != nil {
		return q, err
	}
	q.TypeID = c.QueryParam("type_id")
	v, err := queryUint(c, "type_version", 32, 0)
	if err != nil {
		return q, err
	}
	q.TypeVersion = uint32(v)
	if q.View, err = queryEnum(c, "view", service.ViewTyped, service.ViewRaw, service.ViewBoth); err != nil {
		return q, err
	}
	if q.Hint, err = queryEnum(c, "type_hint_mode", service.HintInherit, service.HintLatest, service.HintExplicit); err != nil {
		return q, err
	}
	q.AsTypeID = c.QueryParam("as_type_id")
	if c.QueryParam("as_type_version") != "" {
		v, err := queryUint(c, "as_type_version", 32, 0)
		if err != nil {
			return q, err
		}
		q.AsVersion, q.HasAsVer = uint32(v), true
	}
	q.Render, err = renderOptions(c)
	return q, err
}

// readCursor takes an opaque cursor of an earlier page: "o<id>" pages
// older (like before_turn_id), "n<id>" newer.
func readCursor(c echo.Context, q *service.TurnQuery) error {
	s := c.QueryParam("cursor")
	if s == "" {
		return nil
	}
	dir, id, ok := decodeTurnCursor(s)
	switch {
	case !ok:
		return paramError("cursor", "not a cursor of this listing")
	case q.Before != 0:
		return paramError("cursor", "give cursor or before_turn_id, not both")
	case dir == 'o':
		q.Before = id
	default:
		q.After = id
	}
	return nil
}

func renderOptions(c echo.Context) (projection.Options, error) {
	var o projection.Options
	var err error
	if o.Bytes, err = queryEnum(c, "bytes_render", "base64", "hex", "len_only"); err != nil {
		return o, err
	}
	if o.U64, err = queryEnum(c, "u64_format", "string", "number"); err != nil {
		return o, err
	}
	if o.Enum, err = queryEnum(c, "enum_render", "label", "number", "both"); err != nil {
		return o, err
	}
	if o.Time, err = queryEnum(c, "time_render", "iso", "unix_ms"); err != nil {
		return o, err
	}
	o.IncludeUnknown, err = queryBool(c, "include_unknown")
	return o, err
}

// turnsJSON is the answer of GET /v1/contexts/{id}/turns.
type turnsJSON struct {
	Meta turnsMeta `json:"meta"`
	// The turns are spliced in after marshalling (see rawjson).
	NextBeforeTurnID *string `json:"next_before_turn_id"`
	// NextCursor pages older, PrevCursor newer; absent at the chain's ends.
	NextCursor string `json:"next_cursor,omitempty"`
	PrevCursor string `json:"prev_cursor,omitempty"`
}

type turnsMeta struct {
	ContextID        string  `json:"context_id"`
	HeadTurnID       string  `json:"head_turn_id"`
	HeadDepth        uint32  `json:"head_depth"`
	RegistryBundleID *string `json:"registry_bundle_id"`
}
