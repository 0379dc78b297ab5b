package service

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/cardboxhq/cardbox/cxdbcompat/projection"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/internal/rawjson"
	"github.com/cardboxhq/cardbox/store"
)

// Views of GET /v1/contexts/{id}/turns.
const (
	ViewTyped = "typed"
	ViewRaw   = "raw"
	ViewBoth  = "both"
)

// Type hint modes (spec section 5.4).
const (
	HintInherit  = "inherit"
	HintLatest   = "latest"
	HintExplicit = "explicit"
)

// DefaultTurnLimit and MaxTurnLimit bound a page of turns.
const (
	DefaultTurnLimit = 64
	MaxTurnLimit     = 10_000
)

// TurnQuery selects and renders a page of a context's turns.
type TurnQuery struct {
	Limit uint32 // DefaultTurnLimit when 0
	// Before pages towards the root: turns older than this one (which must
	// be on the context's chain). After pages towards the head. Neither:
	// the newest turns.
	Before, After uint64
	// TypeID, when set, keeps only turns declaring it (and TypeVersion,
	// when not 0).
	TypeID      string
	TypeVersion uint32
	View        string // ViewTyped (default), ViewRaw, ViewBoth; anything else: base fields only
	Hint        string // HintInherit (default), HintLatest, HintExplicit
	AsTypeID    string
	AsVersion   uint32
	HasAsVer    bool
	Render      projection.Options
}

// TurnPage is a page of turns, oldest first, each rendered as the CXDB
// HTTP API's turn object.
type TurnPage struct {
	Context  store.ContextInfo
	BundleID string // the registry's last bundle, "" when none
	Turns    []json.RawMessage
	// Oldest and Newest are the ids of the first and last turn returned.
	Oldest, Newest uint64
	// HasOlder and HasNewer say whether the chain goes on past the page.
	HasOlder, HasNewer bool
}

// Turns returns a page of a context's chain.
func (s *Service) Turns(ctx context.Context, t store.Tenant, contextID uint64, q TurnQuery) (*TurnPage, error) {
	info, err := s.Context(t, contextID)
	if err != nil {
		return nil, err
	}
	if err := s.checkTurnQuery(t, contextID, &q); err != nil {
		return nil, err
	}
	reg, err := s.Registry(ctx, t)
	if err != nil {
		return nil, err
	}
	ids, hasOlder, hasNewer := s.selectTurns(t, info.TurnID, q)
	page := &TurnPage{Context: info, BundleID: reg.LastBundleID(), HasOlder: hasOlder, HasNewer: hasNewer}
	r := renderer{s: s, t: t, reg: reg, q: &q}
	for _, id := range ids {
		b, err := r.cached(ctx, id)
		if err != nil {
			return nil, err
		}
		page.Turns = append(page.Turns, b)
	}
	if len(ids) > 0 {
		page.Oldest, page.Newest = ids[0], ids[len(ids)-1]
	}
	return page, nil
}

func (s *Service) checkTurnQuery(t store.Tenant, contextID uint64, q *TurnQuery) error {
	if q.Limit == 0 {
		q.Limit = DefaultTurnLimit
	}
	if q.Limit > MaxTurnLimit {
		return invalidParam("limit", "at most %d", MaxTurnLimit)
	}
	if q.Before != 0 && q.After != 0 {
		return invalidParam("before_turn_id", "give either a before or an after cursor, not both")
	}
	for param, id := range map[string]uint64{"before_turn_id": q.Before, "cursor": q.After} {
		if id != 0 && !s.OnChain(t, contextID, id) {
			return invalidParam(param, "turn %d is not on context %d's chain", id, contextID)
		}
	}
	if q.Hint == HintExplicit && (q.AsTypeID == "" || !q.HasAsVer) {
		return invalidParam("as_type_id", "type_hint_mode=explicit needs as_type_id and as_type_version")
	}
	return nil
}

// selectTurns walks the chain ending at head and returns the page's turn
// ids, oldest first.
func (s *Service) selectTurns(t store.Tenant, head uint64, q TurnQuery) (ids []uint64, hasOlder, hasNewer bool) {
	keep := func(turn store.Turn) bool {
		return q.TypeID == "" || (turn.TypeID == q.TypeID && (q.TypeVersion == 0 || turn.TypeVersion == q.TypeVersion))
	}
	if q.After != 0 {
		// Everything newer than After, then the oldest of it.
		var newer []uint64
		for id := head; id != 0 && id != q.After; {
			turn, _ := s.TurnInfo(t, id)
			if keep(turn) {
				newer = append(newer, id)
			}
			id = turn.ParentID
		}
		reverse(newer)
		n := min(len(newer), int(q.Limit))
		return newer[:n], true, n < len(newer)
	}
	start := head
	if q.Before != 0 {
		turn, _ := s.TurnInfo(t, q.Before)
		start, hasNewer = turn.ParentID, true
	}
	id := start
	for id != 0 && len(ids) < int(q.Limit) {
		turn, _ := s.TurnInfo(t, id)
		if keep(turn) {
			ids = append(ids, id)
		}
		id = turn.ParentID
	}
	reverse(ids)
	return ids, s.anyOlder(t, id, keep), hasNewer
}

// anyOlder reports whether the chain from id down holds a turn keep keeps.
func (s *Service) anyOlder(t store.Tenant, id uint64, keep func(store.Turn) bool) bool {
	for id != 0 {
		turn, _ := s.TurnInfo(t, id)
		if keep(turn) {
			return true
		}
		id = turn.ParentID
	}
	return false
}

func reverse(ids []uint64) {
	for i, j := 0, len(ids)-1; i < j; i, j = i+1, j-1 {
		ids[i], ids[j] = ids[j], ids[i]
	}
}

// typeRef is a type id and version as the turn JSON shows them.
type typeRef struct {
	TypeID      string `json:"type_id"`
	TypeVersion uint32 `json:"type_version"`
}

// turnError is the error one turn of a page carries instead of its data.
type turnError struct {
	Code        string  `json:"code"`
	Message     string  `json:"message"`
	TypeID      string  `json:"type_id,omitempty"`
	TypeVersion *uint32 `json:"type_version,omitempty"`
	Blob        string  `json:"blob,omitempty"`
}

// turnJSON is a turn object of GET /v1/contexts/{id}/turns (spec 4.5).
type turnJSON struct {
	TurnID       string   `json:"turn_id"`
	ParentTurnID string   `json:"parent_turn_id"`
	Depth        uint32   `json:"depth"`
	DeclaredType typeRef  `json:"declared_type"`
	DecodedAs    *typeRef `json:"decoded_as,omitempty"`
	// Data and Unknown are spliced in after marshalling (see rawjson).
	Data            json.RawMessage `json:"-"`
	Unknown         json.RawMessage `json:"-"`
	Error           *turnError      `json:"error,omitempty"`
	ContentHash     string          `json:"content_hash_b3,omitempty"`
	Encoding        *uint32         `json:"encoding,omitempty"`
	Compression     *uint32         `json:"compression,omitempty"`
	UncompressedLen *uint32         `json:"uncompressed_len,omitempty"`
	BytesB64        *string         `json:"bytes_b64,omitempty"`
	BytesHex        *string         `json:"bytes_hex,omitempty"`
	BytesLen        *int            `json:"bytes_len,omitempty"`
}

// renderer renders the turns of one page.
type renderer struct {
	s   *Service
	t   store.Tenant
	reg *registry.Registry
	q   *TurnQuery
}

func (r renderer) typed() bool {
	return r.q.View == "" || r.q.View == ViewTyped || r.q.View == ViewBoth
}
func (r renderer) raw() bool { return r.q.View == ViewRaw || r.q.View == ViewBoth }

// renderKey names a rendered turn object: the turn and everything in the
// query that changes its rendering. The registry's generation is the
// entry's version: a published bundle makes every older rendering miss.
type renderKey struct {
	tenant uint32
	turn   uint64
	view   string
	hint   string
	asType string
	asVer  uint32
	render projection.Options
}

// cached renders a turn through the service's cache. Turns are immutable,
// so a rendering is good until the registry changes; renderings that
// carry a per-turn error (an unreadable blob may be repaired) are not
// kept.
func (r renderer) cached(ctx context.Context, id uint64) (json.RawMessage, error) {
	k := renderKey{tenant: r.t.No, turn: id, view: r.q.View, hint: r.q.Hint, asType: r.q.AsTypeID, asVer: r.q.AsVersion, render: r.q.Render}
	version := int64(r.reg.Generation())
	if b := r.s.rendered.Get(k, version); b != nil {
		return b, nil
	}
	b, ok, err := r.render(ctx, id)
	if err == nil && ok {
		r.s.rendered.Put(k, version, b, len(k.view)+len(k.hint)+len(k.asType)+renderOptionBytes(k.render))
	}
	return b, err
}

func renderOptionBytes(o projection.Options) int {
	return len(o.Bytes) + len(o.U64) + len(o.Enum) + len(o.Time)
}

// render renders a turn object; ok is false when it carries a per-turn
// error.
func (r renderer) render(ctx context.Context, id uint64) (b json.RawMessage, ok bool, err error) {
	turn, _ := r.s.TurnInfo(r.t, id)
	out := turnJSON{
		TurnID: idString(id), ParentTurnID: idString(turn.ParentID), Depth: turn.Depth,
		DeclaredType: typeRef{turn.TypeID, turn.TypeVersion},
	}
	if r.typed() || r.raw() {
		payload, err := r.s.TurnPayload(ctx, r.t, id)
		switch {
		case store.KindOf(err) == store.KindUnavailable:
			return nil, false, err
		case err != nil:
			out.Error = &turnError{Code: "BLOB_UNREADABLE", Message: err.Error(), Blob: hex.EncodeToString(turn.Hash[:])}
		default:
			if r.typed() {
				r.project(&out, turn, payload)
			}
			if r.raw() {
				r.rawFields(&out, turn, payload)
			}
		}
	}
	b, err = json.Marshal(out)
	if err != nil {
		return nil, false, err
	}
	return rawjson.AppendFields(b, rawjson.Field{Name: "data", Value: out.Data}, rawjson.Field{Name: "unknown", Value: out.Unknown}), out.Error == nil, nil
}

// target picks the descriptor a turn is decoded with (spec 5.4).
func (r renderer) target(turn store.Turn) (registry.Descriptor, typeRef, bool) {
	switch r.q.Hint {
	case HintLatest:
		d, ok := r.reg.Latest(turn.TypeID)
		return d, typeRef{turn.TypeID, d.Version}, ok
	case HintExplicit:
		d, ok := r.reg.Descriptor(r.q.AsTypeID, r.q.AsVersion)
		return d, typeRef{r.q.AsTypeID, r.q.AsVersion}, ok
	}
	d, ok := r.reg.Descriptor(turn.TypeID, turn.TypeVersion)
	return d, typeRef{turn.TypeID, turn.TypeVersion}, ok
}

func (r renderer) project(out *turnJSON, turn store.Turn, payload []byte) {
	d, as, ok := r.target(turn)
	if !ok {
		v := as.TypeVersion
		out.Error = &turnError{
			Code: "TYPE_NOT_REGISTERED", TypeID: as.TypeID, TypeVersion: &v,
			Message: fmt.Sprintf("type descriptor %s version %d is not in the registry", as.TypeID, as.TypeVersion),
		}
		return
	}
	res, err := projection.Project(payload, d, r.reg, r.q.Render)
	if err != nil {
		out.Error = &turnError{Code: "UNDECODABLE", Message: err.Error()}
		return
	}
	out.DecodedAs = &as
	out.Data, out.Unknown = res.Data, res.Unknown
}

func (r renderer) rawFields(out *turnJSON, turn store.Turn, payload []byte) {
	enc, comp, n := turn.Encoding, uint32(0), uint32(len(payload))
	out.ContentHash = hex.EncodeToString(turn.Hash[:])
	out.Encoding, out.Compression, out.UncompressedLen = &enc, &comp, &n
	switch r.q.Render.Bytes {
	case "hex":
		s := hex.EncodeToString(payload)
		out.BytesHex = &s
	case "len_only":
		l := len(payload)
		out.BytesLen = &l
	default:
		s := base64.StdEncoding.EncodeToString(payload)
		out.BytesB64 = &s
	}
}
