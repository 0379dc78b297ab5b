package turnpage

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cardboxhq/cardbox/cxdbcompat/projection"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/bytecache"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store"
)

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
	Limit       int64   `json:"limit,omitempty"`
}

// Codes of per-turn errors beyond a missing type, a payload that does not
// decode and an unreadable blob: a turn whose rendering alone would pass
// service.MaxPageBytes, and a typed rendering over projection's work bounds.
const (
	codeTooLarge    = "TOO_LARGE"
	codeRenderLimit = "RENDER_LIMIT"
)

// turnJSON is a turn object of GET /v1/contexts/{id}/turns (spec 4.5).
// The payload's bytes (bytes_b64, bytes_hex), data and unknown are
// written after it, straight into the turn's buffer.
type turnJSON struct {
	TurnID          string     `json:"turn_id"`
	ParentTurnID    string     `json:"parent_turn_id"`
	Depth           uint32     `json:"depth"`
	DeclaredType    typeRef    `json:"declared_type"`
	DecodedAs       *typeRef   `json:"decoded_as,omitempty"`
	Error           *turnError `json:"error,omitempty"`
	ContentHash     string     `json:"content_hash_b3,omitempty"`
	Encoding        *uint32    `json:"encoding,omitempty"`
	Compression     *uint32    `json:"compression,omitempty"`
	UncompressedLen *uint32    `json:"uncompressed_len,omitempty"`
	BytesLen        *int       `json:"bytes_len,omitempty"`
}

// renderer renders the turns of one page.
type renderer struct {
	src   Source
	cache *bytecache.Cache[renderKey]
	t     ident.Tenant
	reg   *registry.Registry
	q     *service.TurnQuery
	// last is the payload read last: turns that share a payload (stored
	// once) read it once a page.
	last *lastPayload
}

type lastPayload struct {
	hash    ident.Hash
	payload []byte
}

// payload reads turn's payload, read-only.
func (r renderer) payload(ctx context.Context, turn store.Turn) ([]byte, error) {
	if r.last != nil && r.last.payload != nil && r.last.hash == turn.Hash {
		return r.last.payload, nil
	}
	b, err := r.src.TurnPayload(ctx, r.t, turn.ID)
	if err == nil && r.last != nil {
		*r.last = lastPayload{turn.Hash, b}
	}
	return b, err
}

func (r renderer) typed() bool {
	return r.q.View == "" || r.q.View == service.ViewTyped || r.q.View == service.ViewBoth
}
func (r renderer) raw() bool { return r.q.View == service.ViewRaw || r.q.View == service.ViewBoth }

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

func (r renderer) key(id uint64) renderKey {
	return renderKey{tenant: r.t.No, turn: id, view: r.q.View, hint: r.q.Hint, asType: r.q.AsTypeID, asVer: r.q.AsVersion, render: r.q.Render}
}

func renderOptionBytes(o projection.Options) int {
	return len(o.Bytes) + len(o.U64) + len(o.Enum) + len(o.Time)
}

// plannedTurn is a turn a page means to render, with what it is estimated
// to take.
type plannedTurn struct {
	turn   store.Turn
	cached []byte // its rendering, when the cache had it
	est    int64
}

// errPageFull stops a page before a turn that does not fit what is left of
// it.
var errPageFull = errors.New("page full")

// page renders the turns ids (oldest first) within service.MaxPageBytes and returns
// them oldest first: the newest of them that fit, or with newer the
// oldest. Sizes are estimated from the turns' metadata before a payload is
// read (see estimate), reserved through the query's Reserve, and each
// turn renders within what is left: a turn that does not fit ends the
// page, unless it is the first, which is always answered (if alone it
// would pass the bound, it carries a TOO_LARGE error instead).
func (r renderer) page(ctx context.Context, ids []uint64, newer bool) ([]json.RawMessage, error) {
	order := slices.Clone(ids)
	if !newer {
		slices.Reverse(order)
	}
	version := int64(r.reg.Generation())
	plan := make([]plannedTurn, 0, len(order))
	var total int64
	for _, id := range order {
		p := plannedTurn{}
		p.turn, _ = r.src.TurnInfo(r.t, id)
		if p.cached = r.cache.Get(r.key(id), version); p.cached != nil {
			p.est = int64(len(p.cached))
		} else {
			p.est = r.estimate(p.turn)
		}
		if len(plan) > 0 && total+p.est > service.MaxPageBytes {
			break
		}
		plan = append(plan, p)
		total += p.est
	}
	reserved := min(total, service.MaxPageBytes)
	if err := r.reserve(reserved); err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, len(plan))
	var used int64
	for i := range plan {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := r.cached(ctx, &plan[i], reserved-used, i == 0 && reserved == service.MaxPageBytes, version)
		if errors.Is(err, errPageFull) && i == 0 {
			// Its estimate was short: the first turn may have the
			// whole page.
			if err := r.reserve(service.MaxPageBytes - reserved); err != nil {
				return nil, err
			}
			reserved = service.MaxPageBytes
			b, err = r.cached(ctx, &plan[i], reserved, true, version)
		}
		if errors.Is(err, errPageFull) {
			break
		}
		if err != nil {
			return nil, err
		}
		out = append(out, b)
		used += int64(len(b))
	}
	if !newer {
		slices.Reverse(out)
	}
	return out, nil
}

func (r renderer) reserve(n int64) error {
	if r.q.Reserve == nil || n <= 0 {
		return nil
	}
	return r.q.Reserve(n)
}

// Parts of a turn object's size estimate.
const (
	// turnOverhead is at least what a turn object takes beyond its type
	// ids, payload bytes, data and unknown: ids, depth, the raw view's
	// fields, member names, an error's message.
	turnOverhead = 1 << 10
	// typedPerByte and typedOverhead estimate a typed rendering from its
	// payload's size: field names in place of tags, quotes and braces
	// around values, base64 bytes. A rendering larger than its estimate
	// may end its page early; it never passes service.MaxPageBytes.
	typedPerByte  = 2
	typedOverhead = 256
)

// estimate is what turn's object is expected to take, from its metadata.
// The raw view's bytes are exact (base64 4/3 of the payload, hex twice);
// a typed rendering is guessed, and bounded when rendered (see render).
func (r renderer) estimate(turn store.Turn) int64 {
	n := int64(turn.UncompressedLen)
	est := r.fixedSize(turn) + r.rawSize(n)
	if r.typed() {
		est += typedPerByte*n + typedOverhead
	}
	return est
}

// fixedSize is at most what turn's object takes without its payload's
// bytes, data and unknown (type ids escaped for JSON take at most six
// bytes a byte).
func (r renderer) fixedSize(turn store.Turn) int64 {
	return turnOverhead + 12*int64(len(turn.TypeID)) + 6*int64(len(r.q.AsTypeID))
}

// rawSize is what the raw view's bytes of an n-byte payload take.
func (r renderer) rawSize(n int64) int64 {
	if !r.raw() {
		return 0
	}
	switch r.q.Render.Bytes {
	case "hex":
		return 2 * n
	case "len_only":
		return 0 // a number, within turnOverhead
	}
	return (n + 2) / 3 * 4
}

// cached renders a planned turn within room bytes through the service's
// cache. Turns are immutable, so a rendering is good until the registry
// changes; renderings that carry a per-turn error (an unreadable blob may
// be repaired) are not kept. whole says room is the whole page: a turn
// that does not fit it carries TOO_LARGE, where another is errPageFull.
func (r renderer) cached(ctx context.Context, p *plannedTurn, room int64, whole bool, version int64) (json.RawMessage, error) {
	if p.cached != nil {
		if int64(len(p.cached)) > room && !whole {
			return nil, errPageFull
		}
		return p.cached, nil
	}
	b, ok, err := r.render(ctx, p.turn, room, whole)
	if err == nil && ok {
		k := r.key(p.turn.ID)
		r.cache.Put(k, version, b, len(k.view)+len(k.hint)+len(k.asType)+renderOptionBytes(k.render))
	}
	return b, err
}

// render renders a turn object within room bytes (see cached); ok is
// false when it carries a per-turn error. The object is written once,
// into a buffer of its size: its fixed fields, then the payload's bytes
// (raw view), data and unknown (typed view).
func (r renderer) render(ctx context.Context, turn store.Turn, room int64, whole bool) (b json.RawMessage, ok bool, err error) {
	out := turnJSON{
		TurnID: idString(turn.ID), ParentTurnID: idString(turn.ParentID), Depth: turn.Depth,
		DeclaredType: typeRef{turn.TypeID, turn.TypeVersion},
	}
	if !r.typed() && !r.raw() {
		b, err = json.Marshal(out)
		return b, err == nil, err
	}
	fixed := r.fixedSize(turn)
	if fixed+r.rawSize(int64(turn.UncompressedLen)) > room {
		if !whole {
			return nil, false, errPageFull
		}
		return r.tooLarge(&out, turn, nil, "the payload's %d bytes as %s take %d bytes", turn.UncompressedLen, r.bytesName(), r.rawSize(int64(turn.UncompressedLen)))
	}
	payload, err := r.payload(ctx, turn)
	switch {
	case fault.KindOf(err) == fault.Unavailable:
		return nil, false, err
	case err != nil:
		out.Error = &turnError{Code: "BLOB_UNREADABLE", Message: err.Error(), Blob: hex.EncodeToString(turn.Hash[:])}
		b, err = json.Marshal(out)
		return b, false, err
	}
	rawN := r.rawSize(int64(len(payload)))
	if fixed+rawN > room { // the payload is not the size its turn says
		if !whole {
			return nil, false, errPageFull
		}
		return r.tooLarge(&out, turn, payload, "the payload's %d bytes as %s take %d bytes", len(payload), r.bytesName(), rawN)
	}
	var rend *projection.Rendering
	if r.typed() {
		if rend, err = r.project(&out, turn, payload, room-fixed-rawN, whole); err != nil {
			return nil, false, err
		}
		if rend != nil {
			defer rend.Release()
		}
	}
	return r.write(&out, turn, payload, rend)
}

// tooLarge renders turn with a TOO_LARGE error: why, and the raw view's
// fields other than the bytes.
func (r renderer) tooLarge(out *turnJSON, turn store.Turn, payload []byte, format string, args ...any) (json.RawMessage, bool, error) {
	out.DecodedAs = nil
	out.Error = &turnError{
		Code: codeTooLarge, Blob: hex.EncodeToString(turn.Hash[:]), Limit: service.MaxPageBytes,
		Message: fmt.Sprintf("too large to render: "+format+", over the %d bytes a page may hold; read the payload from GET /v1/blobs/{blob} (or ask for bytes_render=len_only)",
			append(args, service.MaxPageBytes)...),
	}
	if r.raw() {
		n := int(turn.UncompressedLen)
		if payload != nil {
			n = len(payload)
		}
		r.rawFields(out, turn, n)
	}
	b, err := json.Marshal(out)
	return b, false, err
}

func (r renderer) bytesName() string {
	switch r.q.Render.Bytes {
	case "hex", "len_only":
		return r.q.Render.Bytes
	}
	return "base64"
}

// target picks the descriptor a turn is decoded with (spec 5.4).
func (r renderer) target(turn store.Turn) (registry.Descriptor, typeRef, bool) {
	switch r.q.Hint {
	case service.HintLatest:
		d, ok := r.reg.Latest(turn.TypeID)
		return d, typeRef{turn.TypeID, d.Version}, ok
	case service.HintExplicit:
		d, ok := r.reg.Descriptor(r.q.AsTypeID, r.q.AsVersion)
		return d, typeRef{r.q.AsTypeID, r.q.AsVersion}, ok
	}
	d, ok := r.reg.Descriptor(turn.TypeID, turn.TypeVersion)
	return d, typeRef{turn.TypeID, turn.TypeVersion}, ok
}

// project renders payload's typed view within room bytes, or sets the
// turn's error: its type is not registered, it does not decode, it is
// over projection's bounds, or (whole) it alone passes the page bound.
// A rendering that does not fit room otherwise is errPageFull.
func (r renderer) project(out *turnJSON, turn store.Turn, payload []byte, room int64, whole bool) (*projection.Rendering, error) {
	d, as, ok := r.target(turn)
	if !ok {
		v := as.TypeVersion
		out.Error = &turnError{
			Code: "TYPE_NOT_REGISTERED", TypeID: as.TypeID, TypeVersion: &v,
			Message: fmt.Sprintf("type descriptor %s version %d is not in the registry", as.TypeID, as.TypeVersion),
		}
		return nil, nil
	}
	if room <= 0 {
		return nil, errPageFull // whole rooms are larger than a turn's fixed part
	}
	rend, err := projection.Render(payload, d, r.reg, r.q.Render, projection.Limits{MaxBytes: int(min(room, service.MaxPageBytes))})
	var le *projection.LimitError
	switch {
	case err == nil:
		out.DecodedAs = &as
		return rend, nil
	case errors.As(err, &le) && le.Bound == "bytes" && !whole:
		return nil, errPageFull
	case errors.As(err, &le) && le.Bound == "bytes":
		out.Error = &turnError{
			Code: codeTooLarge, Blob: hex.EncodeToString(turn.Hash[:]), Limit: service.MaxPageBytes,
			Message: fmt.Sprintf("too large to render: its typed view takes more than the %d bytes a page may hold; read the payload with view=raw or from GET /v1/blobs/{blob}", service.MaxPageBytes),
		}
	case errors.As(err, &le):
		out.Error = &turnError{Code: codeRenderLimit, Limit: int64(le.Limit), Message: err.Error() + "; read the payload with view=raw"}
	default:
		out.Error = &turnError{Code: "UNDECODABLE", Message: err.Error()}
	}
	return nil, nil
}

// rawFields sets the raw view's fields but the bytes, of an n-byte
// payload.
func (r renderer) rawFields(out *turnJSON, turn store.Turn, n int) {
	enc, comp, l := turn.Encoding, uint32(0), uint32(n)
	out.ContentHash = hex.EncodeToString(turn.Hash[:])
	out.Encoding, out.Compression, out.UncompressedLen = &enc, &comp, &l
	if r.q.Render.Bytes == "len_only" {
		out.BytesLen = &n
	}
}

// write writes the turn object: out, then the payload's bytes in the raw
// view, then the typed view's data and unknown (rend, nil when the turn
// has an error), into one buffer of its size.
func (r renderer) write(out *turnJSON, turn store.Turn, payload []byte, rend *projection.Rendering) (json.RawMessage, bool, error) {
	raw := r.raw()
	if raw {
		r.rawFields(out, turn, len(payload))
	}
	head, err := json.Marshal(out)
	if err != nil {
		return nil, false, err
	}
	size := len(head) + len(`,"unknown":`) + len(`,"data":`)
	if raw {
		size += len(`,"bytes_hex":""`) + int(r.rawSize(int64(len(payload))))
	}
	if rend != nil {
		size += rend.Len()
	}
	b := append(make([]byte, 0, size), head[:len(head)-1]...)
	if raw {
		switch r.q.Render.Bytes {
		case "hex":
			b = append(b, `,"bytes_hex":"`...)
			b = append(hex.AppendEncode(b, payload), '"')
		case "len_only":
		default:
			b = append(b, `,"bytes_b64":"`...)
			b = append(base64.StdEncoding.AppendEncode(b, payload), '"')
		}
	}
	if rend != nil {
		b = rend.AppendData(append(b, `,"data":`...))
		if r.q.Render.IncludeUnknown {
			b = rend.AppendUnknown(append(b, `,"unknown":`...))
		}
	}
	return append(b, '}'), out.Error == nil, nil
}
