package store

import (
	"context"
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/idemindex"
	"github.com/cardboxhq/cardbox/store/internal/groupcommit"
)

// IdempotencyWindow is how long a repeated idempotency key returns the
// original turn.
const IdempotencyWindow = idemindex.Window

// DefaultMaxIdempotencyKeys is the default Options.MaxIdempotencyKeys.
const DefaultMaxIdempotencyKeys = idemindex.DefaultMax

// replayFromDB answers a keyed append from Postgres, for when the key may
// be one the in-memory index forgot for its cap: found reports whether the
// key was used in the window (then the answer is the original turn or a
// conflict). Recent keys are always in memory, so a key committed while
// this runs is caught by the planner.
func (e *Engine) replayFromDB(ctx context.Context, t ident.Tenant, req *AppendRequest) (res AppendResult, found bool, err error) {
	row, found, err := e.lookupKey(ctx, t, req.ContextID, req.IdempotencyKey, e.now().Add(-IdempotencyWindow))
	if err != nil {
		return AppendResult{}, true, err
	}
	if !found {
		return AppendResult{}, false, nil
	}
	turn := uint64(row.TurnID)
	m, ok := e.index.Turns.Get(turn)
	if !ok {
		return AppendResult{}, true, fault.New(fault.Internal, "idempotency key names turn %d, which is not loaded", turn)
	}
	orig := groupcommit.KeyedRequest{
		Hash: m.Hash, TypeID: e.index.Types.Name(m.Tenant, m.TypeRef), TypeVersion: m.TypeVersion,
		Parent: uint64(row.RequestedParentTurnID.Int64), ParentKnown: row.RequestedParentTurnID.Valid,
	}
	if err := groupcommit.CheckRepeat(req, orig, turn); err != nil {
		return AppendResult{}, true, err
	}
	return AppendResult{ContextID: req.ContextID, TurnID: turn, ParentID: m.Parent, Depth: m.Depth, ContentHash: m.Hash, Replayed: true}, true, nil
}

// purgeInterval is how often expired idempotency keys are deleted from
// Postgres.
const purgeInterval = 10 * time.Minute

// PurgeIdempotencyKeys deletes the keys older than IdempotencyWindow from
// Postgres and returns how many; memory forgets them as it goes.
func (e *Engine) PurgeIdempotencyKeys(ctx context.Context) (int64, error) {
	n, err := e.as(pgrole.Sweeper, "").DeleteIdempotencyKeysBefore(ctx, e.now().Add(-IdempotencyWindow))
	if err != nil {
		return 0, fault.Wrap(fault.Unavailable, err, "purge idempotency keys")
	}
	return n, nil
}

// startPurge runs PurgeIdempotencyKeys every purgeInterval until Close.
func (e *Engine) startPurge() {
	ctx, cancel := context.WithCancel(context.Background())
	e.stopPurge, e.purgeDone = cancel, make(chan struct{})
	go func() {
		defer close(e.purgeDone)
		t := time.NewTicker(purgeInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if n, err := e.PurgeIdempotencyKeys(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("purge idempotency keys", "err", err)
			} else if n > 0 {
				e.log.Info("purged expired idempotency keys", "keys", n)
			}
		}
	}()
}
