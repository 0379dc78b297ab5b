package cardboxhttp

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/cardboxhq/cardbox/api/internal/jsonbody"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/assembly"
	"github.com/cardboxhq/cardbox/cardbox/fromcxdb"
	"github.com/cardboxhq/cardbox/cardbox/layout"
	"github.com/cardboxhq/cardbox/internal/appendjson"
	"github.com/cardboxhq/cardbox/internal/fault"
)

// AssemblyRoutes serve context assembly over CardBox boxes: a box's
// entries (zones and positions), snapshots, derived boxes, assembly
// within a token budget, and cards by content hash.
type AssemblyRoutes struct {
	svc *cardbox.Service
	// turns is CXDB, for boxes derived from contexts; nil when absent.
	turns fromcxdb.Turns
}

// Assembly returns the assembly routes over svc; turns (nil: none) serves
// boxes derived from CXDB contexts.
func Assembly(svc *cardbox.Service, turns fromcxdb.Turns) *AssemblyRoutes {
	return &AssemblyRoutes{svc: svc, turns: turns}
}

// Register adds the routes.
func (r *AssemblyRoutes) Register(e *echo.Echo) {
	p := e.Group("/projects/:project_id")
	p.GET("/cards", r.cardsByContentHash)
	b := p.Group("/boxes/:box_id")
	b.GET("/entries", r.entries)
	b.POST("/entries", r.insertEntries)
	b.PATCH("/entries/:entry_id", r.changeEntry)
	b.DELETE("/entries/:entry_id", r.removeEntry)
	b.POST("/reorder", r.reorder)
	b.POST("/snapshots", r.takeSnapshot)
	b.GET("/snapshots", r.snapshots)
	b.GET("/snapshots/:snapshot_id", r.snapshot)
	b.GET("/snapshots/:snapshot_id/diff", r.diff)
	b.POST("/restore", r.restore)
	b.POST("/derive", r.derive)
	b.POST("/assemble", r.assemble)
}

// MapError maps the errors of assembly: a budget smaller than the
// permanent zone is 422 with the shortfall; the rest are CardBox's
// errors (the CXDB service's, from boxes derived from contexts, are
// *fault.Error values already).
func (r *AssemblyRoutes) MapError(err error) *fault.Error {
	var be *assembly.BudgetError
	if errors.As(err, &be) {
		e := fault.New(fault.Unprocessable, "%s", be.Error())
		e.Details = map[string]any{"budget": be.Budget, "permanent_tokens": be.Permanent, "short_by": be.Permanent - be.Budget}
		return e
	}
	return MapError(err)
}

// Bodies of the assembly routes.
type (
	entryJSON struct {
		EntryID  string `json:"entry_id"`
		CardID   string `json:"card_id"`
		Zone     string `json:"zone"`
		Position string `json:"position"`
		Draft    bool   `json:"draft"`
	}
	entriesJSON struct {
		ProjectID  string      `json:"project_id"`
		BoxID      string      `json:"box_id"`
		Structured bool        `json:"structured"`
		Entries    []entryJSON `json:"entries"`
		UpdatedAt  time.Time   `json:"updated_at"`
	}
	placeInput struct {
		Zone   string `json:"zone"`
		After  string `json:"after"`
		Before string `json:"before"`
		Index  *int   `json:"index"`
	}
	insertEntriesRequest struct {
		CardIDs []string `json:"card_ids"`
		placeInput
		Draft bool `json:"draft"`
	}
	changeEntryRequest struct {
		placeInput
		Draft *bool `json:"draft"`
	}
	reorderRequest struct {
		Zone     string   `json:"zone"`
		EntryIDs []string `json:"entry_ids"`
	}
	snapshotRequest struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	snapshotJSON struct {
		BoxID      string          `json:"box_id"`
		SnapshotID string          `json:"snapshot_id"`
		Metadata   json.RawMessage `json:"metadata"`
		CreatedAt  time.Time       `json:"created_at"`
		Length     int             `json:"length"`
		Entries    []entryJSON     `json:"entries,omitempty"`
	}
	changedEntryJSON struct {
		From entryJSON `json:"from"`
		To   entryJSON `json:"to"`
	}
	diffJSON struct {
		Added   []entryJSON        `json:"added"`
		Removed []entryJSON        `json:"removed"`
		Changed []changedEntryJSON `json:"changed"`
	}
	restoreRequest struct {
		SnapshotID string `json:"snapshot_id"`
		FromBoxID  string `json:"from_box_id"`
	}
	deriveRequest struct {
		FromBoxID   string `json:"from_box_id"`
		KeepWorking bool   `json:"keep_working"`
		// ContextID and UpToTurnID are CXDB ids: decimal strings or numbers.
		ContextID  json.Number `json:"context_id"`
		UpToTurnID json.Number `json:"up_to_turn_id"`
	}
	assembleRequest struct {
		Budget    *int   `json:"budget"`
		Tokenizer string `json:"tokenizer"`
		Format    string `json:"format"`
	}
)

func renderEntry(e layout.Entry) entryJSON {
	return entryJSON{EntryID: e.EntryID, CardID: e.CardID, Zone: e.Zone.String(), Position: e.Position, Draft: e.Draft}
}

func renderEntries(es []layout.Entry) []entryJSON {
	out := make([]entryJSON, len(es))
	for i, e := range es {
		out[i] = renderEntry(e)
	}
	return out
}

func renderBoxEntries(project string, b cardbox.BoxEntries) entriesJSON {
	return entriesJSON{ProjectID: project, BoxID: b.BoxID, Structured: b.Structured, Entries: renderEntries(b.Entries), UpdatedAt: b.UpdatedAt.UTC()}
}

func (p placeInput) place() layout.Place {
	return layout.Place{Zone: p.Zone, After: p.After, Before: p.Before, Index: p.Index}
}

func (p placeInput) moves() bool {
	return p.Zone != "" || p.After != "" || p.Before != "" || p.Index != nil
}

func (r *AssemblyRoutes) cardsByContentHash(c echo.Context) error {
	project, err := param(c, "project_id")
	if err != nil {
		return err
	}
	hash := c.QueryParam("content_hash")
	if hash == "" {
		e := fault.New(fault.Invalid, "content_hash is required: the hex BLAKE3 hash of a card's content as canonical JSON")
		e.Details = map[string]any{"field": "content_hash"}
		return e
	}
	cards, err := r.svc.CardsWithContentHash(c.Request().Context(), project, hash)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]rawCards{"cards": rawCards(cards)})
}

func (r *AssemblyRoutes) entries(c echo.Context) error {
	project, box, err := params(c, "box_id")
	if err != nil {
		return err
	}
	b, err := r.svc.Entries(c.Request().Context(), project, box)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderBoxEntries(project, b))
}

func (r *AssemblyRoutes) insertEntries(c echo.Context) error {
	project, box, req, err := pathAndBody[insertEntriesRequest](c, "box_id")
	if err != nil {
		return err
	}
	added, err := r.svc.InsertEntries(c.Request().Context(), project, box, req.CardIDs, req.place(), req.Draft)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string][]entryJSON{"entries": renderEntries(added)})
}

func (r *AssemblyRoutes) changeEntry(c echo.Context) error {
	project, box, entry, err := boxParams(c, "entry_id")
	if err != nil {
		return err
	}
	var req changeEntryRequest
	if err := jsonbody.Decode(c, &req); err != nil {
		return err
	}
	e, err := r.svc.ChangeEntry(c.Request().Context(), project, box, entry,
		cardbox.EntryChange{Move: req.moves(), Place: req.place(), Draft: req.Draft})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderEntry(e))
}

func (r *AssemblyRoutes) removeEntry(c echo.Context) error {
	project, box, entry, err := boxParams(c, "entry_id")
	if err != nil {
		return err
	}
	if err := r.svc.RemoveEntry(c.Request().Context(), project, box, entry); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (r *AssemblyRoutes) reorder(c echo.Context) error {
	project, box, req, err := pathAndBody[reorderRequest](c, "box_id")
	if err != nil {
		return err
	}
	b, err := r.svc.ReorderZone(c.Request().Context(), project, box, req.Zone, req.EntryIDs)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderBoxEntries(project, b))
}

func renderSnapshot(s cardbox.Snapshot) snapshotJSON {
	out := snapshotJSON{BoxID: s.BoxID, SnapshotID: s.SnapshotID, Metadata: s.Metadata, CreatedAt: s.CreatedAt.UTC(), Length: s.Length}
	if s.Entries != nil {
		out.Entries = renderEntries(s.Entries)
	}
	return out
}

func (r *AssemblyRoutes) takeSnapshot(c echo.Context) error {
	project, box, err := params(c, "box_id")
	if err != nil {
		return err
	}
	var req snapshotRequest
	if c.Request().ContentLength != 0 {
		if err := jsonbody.Decode(c, &req); err != nil {
			return err
		}
	}
	s, err := r.svc.TakeSnapshot(c.Request().Context(), project, box, req.Metadata)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, renderSnapshot(s))
}

func (r *AssemblyRoutes) snapshots(c echo.Context) error {
	project, box, err := params(c, "box_id")
	if err != nil {
		return err
	}
	list, err := r.svc.Snapshots(c.Request().Context(), project, box)
	if err != nil {
		return err
	}
	out := make([]snapshotJSON, len(list))
	for i, s := range list {
		out[i] = renderSnapshot(s)
	}
	return c.JSON(http.StatusOK, map[string][]snapshotJSON{"snapshots": out})
}

func (r *AssemblyRoutes) snapshot(c echo.Context) error {
	project, box, id, err := boxParams(c, "snapshot_id")
	if err != nil {
		return err
	}
	s, err := r.svc.GetSnapshot(c.Request().Context(), project, box, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderSnapshot(s))
}

func (r *AssemblyRoutes) diff(c echo.Context) error {
	project, box, id, err := boxParams(c, "snapshot_id")
	if err != nil {
		return err
	}
	d, err := r.svc.DiffSnapshots(c.Request().Context(), project, box, id, c.QueryParam("against"))
	if err != nil {
		return err
	}
	out := diffJSON{Added: renderEntries(d.Added), Removed: renderEntries(d.Removed), Changed: make([]changedEntryJSON, len(d.Changed))}
	for i, ch := range d.Changed {
		out.Changed[i] = changedEntryJSON{From: renderEntry(ch.From), To: renderEntry(ch.To)}
	}
	return c.JSON(http.StatusOK, out)
}

func (r *AssemblyRoutes) restore(c echo.Context) error {
	project, box, req, err := pathAndBody[restoreRequest](c, "box_id")
	if err != nil {
		return err
	}
	b, err := r.svc.RestoreSnapshot(c.Request().Context(), project, box, req.FromBoxID, req.SnapshotID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderBoxEntries(project, b))
}

func (r *AssemblyRoutes) derive(c echo.Context) error {
	project, box, req, err := pathAndBody[deriveRequest](c, "box_id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var b cardbox.BoxEntries
	switch {
	case req.FromBoxID != "" && req.ContextID != "":
		return badField("from_box_id", "give from_box_id or context_id, not both")
	case req.FromBoxID != "":
		b, err = r.svc.DeriveFromBox(ctx, project, box, req.FromBoxID, req.KeepWorking)
	case req.ContextID != "":
		if r.turns == nil {
			return fault.New(fault.Unprocessable, "this server has no CXDB store to derive boxes from")
		}
		contextID, err := cxdbID("context_id", req.ContextID)
		if err != nil {
			return err
		}
		upTo := uint64(0)
		if req.UpToTurnID != "" {
			if upTo, err = cxdbID("up_to_turn_id", req.UpToTurnID); err != nil {
				return err
			}
		}
		b, err = fromcxdb.Derive(ctx, r.svc, r.turns, project, box, contextID, upTo)
		if err != nil {
			return err
		}
	default:
		return badField("from_box_id", "give from_box_id (a box) or context_id (a CXDB context)")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderBoxEntries(project, b))
}

func badField(field, msg string) *fault.Error {
	e := fault.New(fault.Invalid, "%s", msg)
	e.Details = map[string]any{"field": field}
	return e
}

// cxdbID reads a CXDB id given as a decimal string or number.
func cxdbID(field string, n json.Number) (uint64, error) {
	id, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil || id == 0 {
		return 0, badField(field, field+" must be a positive integer, got "+strconv.Quote(n.String()))
	}
	return id, nil
}

func (r *AssemblyRoutes) assemble(c echo.Context) error {
	project, box, req, err := pathAndBody[assembleRequest](c, "box_id")
	if err != nil {
		return err
	}
	if req.Budget == nil {
		return badField("budget", "budget is required: the most tokens the window may take")
	}
	a, err := r.svc.Assemble(c.Request().Context(), project, box,
		assembly.Request{Budget: *req.Budget, Tokenizer: req.Tokenizer, Format: req.Format})
	if err != nil {
		return err
	}
	buf := bodyPool.Get().(*[]byte)
	defer func() {
		// net/http has copied or sent the body when Write returns.
		if cap(*buf) <= maxPooledBody {
			bodyPool.Put(buf)
		}
	}()
	if size := assembledSize(a); cap(*buf) < size {
		*buf = make([]byte, 0, size)
	}
	*buf = appendAssembled((*buf)[:0], project, &a)
	return sendJSON(c, http.StatusOK, *buf)
}

// appendAssembled appends an assembly's answer, by hand rather than by
// encoding/json: its window is already JSON, and a box of thousands of
// entries lists most of them as left out. It writes the bytes
// encoding/json's Encoder wrote for the struct this answer once was
// (members in this order, zones by name, the window as it is, a newline
// at the end); TestAssembledAnswerIsWhatEncodingJSONWrites holds it to
// that.
//
//	{"project_id", "box_id", "tokenizer", "format", "budget", "tokens",
//	 "zones": {"permanent"|"stable"|"working": {"entries", "tokens"}},
//	 "entry_ids", "cards"|"messages", "left_out": [{"entry_id", "card_id",
//	 "zone", "reason", "tokens"}], "hash"}
func appendAssembled(b []byte, project string, a *assembly.Assembled) []byte {
	b = append(b, `{"project_id":`...)
	b = appendjson.String(b, project)
	b = append(b, `,"box_id":`...)
	b = appendjson.String(b, a.BoxID)
	b = append(b, `,"tokenizer":`...)
	b = appendjson.String(b, a.Tokenizer)
	b = append(b, `,"format":`...)
	b = appendjson.String(b, a.Format)
	b = append(b, `,"budget":`...)
	b = strconv.AppendInt(b, int64(a.Budget), 10)
	b = append(b, `,"tokens":`...)
	b = strconv.AppendInt(b, int64(a.Tokens), 10)
	b = append(b, `,"zones":{`...)
	for z, t := range a.Zones { // layout.ZoneNames are in the order of their names
		if z > 0 {
			b = append(b, ',')
		}
		b = appendjson.String(b, layout.Zone(z).String())
		b = append(b, `:{"entries":`...)
		b = strconv.AppendInt(b, int64(t.Entries), 10)
		b = append(b, `,"tokens":`...)
		b = strconv.AppendInt(b, int64(t.Tokens), 10)
		b = append(b, '}')
	}
	b = append(b, `},"entry_ids":`...)
	b = appendjson.Strings(b, a.EntryIDs)
	if len(a.Window) > 0 {
		if a.Format == assembly.FormatMessages {
			b = append(b, `,"messages":`...)
		} else {
			b = append(b, `,"cards":`...)
		}
		b = append(b, a.Window...)
	}
	b = append(b, `,"left_out":[`...)
	for i, l := range a.LeftOut {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"entry_id":`...)
		b = appendjson.String(b, l.EntryID)
		b = append(b, `,"card_id":`...)
		b = appendjson.String(b, l.CardID)
		b = append(b, `,"zone":`...)
		b = appendjson.String(b, l.Zone.String())
		b = append(b, `,"reason":`...)
		b = appendjson.String(b, l.Reason)
		b = append(b, `,"tokens":`...)
		b = strconv.AppendInt(b, int64(l.Tokens), 10)
		b = append(b, '}')
	}
	b = append(b, `],"hash":`...)
	b = appendjson.String(b, a.Hash)
	return append(b, "}\n"...)
}

// assembledSize is a capacity for appendAssembled's answer that is
// rarely exceeded.
func assembledSize(a assembly.Assembled) int {
	n := 512 + len(a.BoxID) + len(a.Window) + len(a.Hash)
	for _, id := range a.EntryIDs {
		n += len(id) + 3
	}
	for _, l := range a.LeftOut {
		n += 80 + len(l.EntryID) + len(l.CardID)
	}
	return n
}
