package service

import (
	"context"

	"github.com/cardboxhq/cardbox/cxdbcompat/projection"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/internal/ident"
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

// MaxPageBytes bounds the JSON of a page's turns as GET_LAST bounds its
// payloads (48 MiB, store's maxListBytes): a page stops before the turn
// that would pass it, whatever its limit and however large its payloads
// (see package turnpage).
const MaxPageBytes = 48 << 20

// TurnQuery selects and renders a page of a context's turns. The service
// selects (SelectTurns checks every field); View, Render and Reserve are
// for the renderer of the page (package turnpage).
type TurnQuery struct {
	Limit uint32 // DefaultTurnLimit when 0
	// Before pages towards the root: turns older than this one (which must
	// be on the context's chain). After pages towards the head. Neither:
	// the newest turns.
	Before, After uint64
	// UpTo, when set (and neither Before nor After is), pages from this
	// turn, which must be on the context's chain, towards the root: the
	// chain as it was when UpTo was its head.
	UpTo uint64
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
	// Reserve, if set, is told the bytes the page's turns are estimated
	// to take before any is rendered (at most MaxPageBytes), and once more
	// with the rest of MaxPageBytes if its first turn needs it: the
	// caller charges them to a memory budget until the page is sent. Its
	// error fails the page.
	Reserve func(n int64) error
}

// TurnSelection is the turns a TurnQuery selects from a context's chain,
// before any is read or rendered: the surfaces render them (package
// turnpage builds the CXDB HTTP API's turn objects).
type TurnSelection struct {
	Context store.ContextInfo
	// Registry is the tenant's type registry the turns are rendered with.
	Registry *registry.Registry
	// IDs are the selected turns, oldest first.
	IDs []uint64
	// HasOlder and HasNewer say whether the chain goes on past them.
	HasOlder, HasNewer bool
}

// SelectTurns checks q (filling in its default limit) and selects its
// page of a context's chain.
func (s *Service) SelectTurns(ctx context.Context, t ident.Tenant, contextID uint64, q *TurnQuery) (*TurnSelection, error) {
	info, err := s.Context(t, contextID)
	if err != nil {
		return nil, err
	}
	if err := s.checkTurnQuery(t, contextID, q); err != nil {
		return nil, err
	}
	reg, err := s.Registry(ctx, t)
	if err != nil {
		return nil, err
	}
	ids, hasOlder, hasNewer := s.selectTurns(t, info.TurnID, *q)
	return &TurnSelection{Context: info, Registry: reg, IDs: ids, HasOlder: hasOlder, HasNewer: hasNewer}, nil
}

func (s *Service) checkTurnQuery(t ident.Tenant, contextID uint64, q *TurnQuery) error {
	if q.Limit == 0 {
		q.Limit = DefaultTurnLimit
	}
	if q.Limit > MaxTurnLimit {
		return invalidParam("limit", "at most %d", MaxTurnLimit)
	}
	if q.Before != 0 && q.After != 0 {
		return invalidParam("before_turn_id", "give either a before or an after cursor, not both")
	}
	if q.UpTo != 0 && (q.Before != 0 || q.After != 0) {
		return invalidParam("up_to_turn_id", "give either up_to_turn_id or a cursor, not both")
	}
	for param, id := range map[string]uint64{"before_turn_id": q.Before, "cursor": q.After, "up_to_turn_id": q.UpTo} {
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
func (s *Service) selectTurns(t ident.Tenant, head uint64, q TurnQuery) (ids []uint64, hasOlder, hasNewer bool) {
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
	if q.UpTo != 0 {
		start, hasNewer = q.UpTo, q.UpTo != head
	}
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
func (s *Service) anyOlder(t ident.Tenant, id uint64, keep func(store.Turn) bool) bool {
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
