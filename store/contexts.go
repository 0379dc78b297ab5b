package store

import (
	"context"
	"fmt"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// Contexts returns every context of the tenant, in no order.
func (e *Engine) Contexts(t ident.Tenant) []ContextInfo { return e.index.Contexts.All(t.No) }

// Context returns one context of the tenant.
func (e *Engine) Context(t ident.Tenant, id uint64) (ContextInfo, error) {
	s, err := e.contextOf(t, id)
	if err != nil {
		return ContextInfo{}, err
	}
	return s.Info(id), nil
}

// TurnInfo returns a committed turn of the tenant, without its payload.
func (e *Engine) TurnInfo(t ident.Tenant, id uint64) (Turn, bool) {
	m, ok := e.turnOf(t, id)
	if !ok {
		return Turn{}, false
	}
	turn, _ := e.turn(id, &m, e.index.Types.Name(t.No, m.TypeRef), false)
	return turn, true
}

// Root returns the first turn (depth 1) of the chain ending at turn id, or
// 0 when there is no such turn.
func (e *Engine) Root(t ident.Tenant, id uint64) uint64 {
	for id != 0 {
		m, ok := e.turnOf(t, id)
		if !ok {
			return 0
		}
		if m.Depth <= 1 {
			return id
		}
		id = m.Parent
	}
	return 0
}

// OnChain reports whether turn id is the head of the context or one of its
// ancestors.
func (e *Engine) OnChain(t ident.Tenant, contextID, id uint64) bool {
	s, err := e.contextOf(t, contextID)
	if err != nil {
		return false
	}
	m, ok := e.turnOf(t, id)
	return ok && e.onChain(s.Head, id, m.Depth)
}

// TurnPayload returns a turn's uncompressed payload, read-only.
func (e *Engine) TurnPayload(_ context.Context, t ident.Tenant, id uint64) ([]byte, error) {
	m, ok := e.turnOf(t, id)
	if !ok {
		return nil, fault.New(fault.NotFound, "turn %d not found", id)
	}
	data, err := e.blobs.View(m.Hash)
	if err != nil {
		return nil, e.blobReadError(err, m.Hash, fmt.Sprintf("payload of turn %d", id))
	}
	return data, nil
}

// fsLookupBatch is how many ancestors one query asks about when looking
// for the fs root a turn inherits.
const fsLookupBatch = 256

// FSRoot returns the fs tree root attached to turn id or, failing that, to
// its nearest ancestor, and the turn it is attached to; ok is false when
// none has one or the turn does not exist.
func (e *Engine) FSRoot(ctx context.Context, t ident.Tenant, id uint64) (root ident.Hash, from uint64, ok bool, err error) {
	if _, exists := e.turnOf(t, id); !exists {
		return ident.Hash{}, 0, false, nil
	}
	for id != 0 {
		chain := e.ancestors(t, id, fsLookupBatch)
		rows, err := e.as(pgrole.Tenant, t.ID).FSAttachments(ctx, db.FSAttachmentsParams{TenantID: t.ID, TurnIds: chain})
		if err != nil {
			return ident.Hash{}, 0, false, fault.Wrap(fault.Unavailable, err, "look up fs roots")
		}
		if h, turn, found := nearest(chain, rows); found {
			return h, turn, true, nil
		}
		id = e.parentOf(t, uint64(chain[len(chain)-1]))
	}
	return ident.Hash{}, 0, false, nil
}

// ancestors returns up to n turn ids from id towards the root.
func (e *Engine) ancestors(t ident.Tenant, id uint64, n int) []int64 {
	out := make([]int64, 0, n)
	for id != 0 && len(out) < n {
		out = append(out, int64(id))
		id = e.parentOf(t, id)
	}
	return out
}

func (e *Engine) parentOf(t ident.Tenant, id uint64) uint64 {
	m, ok := e.turnOf(t, id)
	if !ok {
		return 0
	}
	return m.Parent
}

// nearest picks the attachment of the first turn of chain that has one.
func nearest(chain []int64, rows []db.FSAttachmentsRow) (ident.Hash, uint64, bool) {
	byTurn := make(map[int64][]byte, len(rows))
	for _, r := range rows {
		byTurn[r.TurnID] = r.FsRootHash
	}
	for _, id := range chain {
		if h, ok := byTurn[id]; ok && len(h) == len(ident.Hash{}) {
			return ident.Hash(h), uint64(id), true
		}
	}
	return ident.Hash{}, 0, false
}
