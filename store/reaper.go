package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pace"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
)

// Reaping: the deleted contexts' dead turns are worked out and buried off
// the request path, a batch of contexts at a time.
const (
	reapContexts  = 100  // deleted contexts per batch
	buryTurnBatch = 5000 // turn rows per statement
	reapRetry     = 10 * time.Second
)

// ReapStats says what one reaping did.
type ReapStats struct {
	Contexts int   // contexts reaped
	Dead     int64 // turns that died
	// Released counts the blob claims released (see releaseClaims);
	// ClaimsPending says a tenant kept writing while its claims were
	// reviewed: they are reviewed again later. NextClaimReview is when
	// the grace of the claims uploads keep next ends (zero: none).
	Released        int
	ClaimsPending   bool
	NextClaimReview time.Time
	// DeletionsPending says contexts were being deleted while the
	// deleted contexts were listed: those left are reaped by the pass
	// the end of their deletion wakes.
	DeletionsPending bool
}

// startReaper reaps at start and whenever a context is deleted, until
// Close.
func (e *Engine) startReaper() {
	ctx, cancel := context.WithCancel(context.Background())
	e.reapWake = make(chan struct{}, 1)
	e.stopReaper, e.reaperDone = cancel, make(chan struct{})
	e.wakeReaper()
	go func() {
		defer close(e.reaperDone)
		// due fires when the next deferred review of blob claims falls
		// due (see releaseClaims).
		due := time.NewTimer(time.Hour)
		due.Stop()
		defer due.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-e.reapWake:
			case <-due.C:
			}
			stats, err := e.reapDeleted(ctx, e.opts.ReapPace)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				e.log.Warn("reap deleted contexts; retrying", "err", err, "in", reapRetry)
			}
			if !stats.NextClaimReview.IsZero() {
				due.Reset(max(stats.NextClaimReview.Sub(e.now()), reapRetry))
			}
			if err != nil || stats.ClaimsPending {
				select {
				case <-ctx.Done():
					return
				case <-time.After(reapRetry):
					e.wakeReaper()
				}
			}
		}
	}()
}

func (e *Engine) wakeReaper() {
	if e.reapWake == nil {
		return
	}
	select {
	case e.reapWake <- struct{}{}:
	default:
	}
}

// ReapDeleted buries the dead turns of every deleted context not reaped
// yet, then releases the blob claims their tenants no longer need (see
// releaseClaims), and returns once none is left, or early, with
// ReapStats.DeletionsPending, when contexts are being deleted meanwhile.
func (e *Engine) ReapDeleted(ctx context.Context) (ReapStats, error) { return e.reapDeleted(ctx, nil) }

// reapDeleted is ReapDeleted working a step at a time on budget (the
// background reaper's pace, Options.ReapPace; nil: all the time).
func (e *Engine) reapDeleted(ctx context.Context, budget *pace.Budget) (ReapStats, error) {
	e.reapMu.Lock()
	defer e.reapMu.Unlock()
	var total ReapStats
	for {
		mark := e.deleting.Mark()
		rows, err := e.as(pgrole.Sweeper, "").ListUnreapedContexts(ctx, reapContexts)
		if err != nil {
			return total, fmt.Errorf("list deleted contexts: %w", err)
		}
		if len(rows) > 0 && !e.deleting.Quiet(mark) {
			// Some contexts listed may be half-way through their deletion
			// (see DeleteContexts), whose end wakes the reaper again.
			total.DeletionsPending = true
			return total, nil
		}
		if len(rows) == 0 {
			n, err := e.releaseClaims(ctx, budget)
			total.Released = n
			if errors.Is(err, errClaimsBusy) {
				total.ClaimsPending, err = true, nil
			}
			if err != nil {
				return total, err
			}
			next, err := e.as(pgrole.Sweeper, "").NextBlobClaimReview(ctx, e.now())
			if err != nil {
				return total, fmt.Errorf("look up the next review of blob claims: %w", err)
			}
			if next.After(time.Unix(0, 0)) {
				total.NextClaimReview = next
			}
			return total, nil
		}
		for len(rows) > 0 {
			n := 1
			for n < len(rows) && rows[n].TenantID == rows[0].TenantID {
				n++
			}
			var dead int64
			err := budget.Step(ctx, func() (err error) {
				dead, err = e.reapTenant(ctx, rows[0].TenantID, rows[:n])
				return err
			})
			if err != nil {
				return total, err
			}
			total.Contexts += n
			total.Dead += dead
			rows = rows[n:]
		}
	}
}

// reapTenant buries the dead turns of some deleted contexts of one tenant.
func (e *Engine) reapTenant(ctx context.Context, tenantID string, rows []storedb.ListUnreapedContextsRow) (int64, error) {
	sweep := e.as(pgrole.Sweeper, tenantID)
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ContextID
	}
	t, err := e.tenants.get(ctx, tenantID)
	if err != nil && fault.KindOf(err) != fault.NotFound {
		return 0, fmt.Errorf("look up tenant %q: %w", tenantID, err)
	}
	if err != nil || e.gate.Gone(t.No) {
		// A deleted tenant's rows go with it (tenant deletion).
		err := sweep.MarkContextsReaped(ctx, storedb.MarkContextsReapedParams{TenantID: tenantID, ContextIds: ids})
		if err == nil {
			e.index.Contexts.ForgetJumps(ids)
		}
		return 0, err
	}
	dead, err := e.settle(ctx, t, rows)
	if err != nil {
		return 0, err
	}
	buried := int64(0)
	for len(dead) > 0 {
		n := min(len(dead), buryTurnBatch)
		gone, err := e.bury(ctx, t, dead[:n])
		if err != nil {
			return buried, fmt.Errorf("bury dead turns of tenant %q: %w", t.ID, err)
		}
		// Counted as their rows go, batch by batch: a pass that fails
		// half-way has uncounted exactly the turns it removed.
		e.index.Turns.Bury(gone)
		e.usage.Add(t.No, -gone*TurnCharge)
		e.noteDeadTurns(dead[:n], e.now())
		buried += gone
		dead = dead[n:]
	}
	if err := sweep.MarkContextsReaped(ctx, storedb.MarkContextsReapedParams{TenantID: t.ID, ContextIds: ids}); err != nil {
		return 0, fmt.Errorf("mark contexts of tenant %q reaped: %w", t.ID, err)
	}
	e.index.Contexts.ForgetJumps(ids)
	return buried, nil
}

// bury removes the rows of some dead turns of one tenant and takes them
// out of the analytics rollups, in one transaction: no reader sees rows
// gone while the rollups still count them, nor rollup rows left at zero.
// It returns how many turn rows went.
func (e *Engine) bury(ctx context.Context, t ident.Tenant, turns []int64) (int64, error) {
	tenantID := t.ID
	var gone int64
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		q := storedb.New(pgrole.As(tx, pgrole.Sweeper, tenantID))
		// The projector adds to the rollups this takes the turns out of:
		// one at a time, or the two deadlock.
		if err := q.LockRollupsForBurial(ctx, int32(t.No)); err != nil {
			return fmt.Errorf("wait for the projector: %w", err)
		}
		// The blobs they name are reviewed once they are gone (see
		// releaseClaims): queued first, as their rows go next.
		err := q.QueueBlobClaimReviews(ctx, storedb.QueueBlobClaimReviewsParams{TenantID: tenantID, TurnIds: turns})
		if err != nil {
			return fmt.Errorf("queue the blobs of dead turns for review: %w", err)
		}
		r, err := q.BuryTurns(ctx, storedb.BuryTurnsParams{TenantID: tenantID, TurnIds: turns})
		if err != nil {
			return err
		}
		gone = r.Turns
		if len(r.Days) == 0 && len(r.KeyedContextIds) == 0 {
			return nil
		}
		err = q.DropEmptyRollups(ctx, storedb.DropEmptyRollupsParams{TenantID: tenantID, Days: r.Days, KeyedContextIds: r.KeyedContextIds})
		if err != nil {
			return fmt.Errorf("drop empty rollups: %w", err)
		}
		return nil
	})
	return gone, err
}

// settle works out which turns die with some deleted contexts of one
// tenant and hides them at once (memindex.Index.Dead), returning them;
// their rows stay until they are buried. Turns hidden by an earlier
// settling whose rows are still there are among them again.
func (e *Engine) settle(ctx context.Context, t ident.Tenant, rows []storedb.ListUnreapedContextsRow) ([]int64, error) {
	candidates, err := e.candidates(ctx, t, rows)
	if err != nil {
		return nil, err
	}
	// A turn hidden already is reached by no live head (nothing could
	// take it as a parent since), so it stays dead: only the others are
	// walked, and when there are none (the reaper after DeleteContexts
	// settled the same contexts) writes are not paused at all.
	var dead []int64
	fresh := make(map[uint64]uint32, len(candidates))
	for id, depth := range candidates {
		if e.index.Dead.Has(id) {
			dead = append(dead, int64(id))
		} else {
			fresh[id] = depth
		}
	}
	if len(fresh) == 0 {
		return dead, nil
	}
	// Under the gate: no fork or append with an explicit parent can take
	// a candidate as its base between the walk and the marking.
	e.gate.Quiesce(func() {
		e.spareReachable(t, fresh)
		for id := range fresh {
			e.index.Dead.Add(id)
			dead = append(dead, int64(id))
		}
	})
	return dead, nil
}

// candidates are the turns that may die with the contexts and whose rows
// are still there: the turns appended to them, and those of their head
// chains that belong to a deleted context (forks of deleted contexts kept
// them alive until now). Turns hidden by an earlier settling are among
// them until they are buried.
func (e *Engine) candidates(ctx context.Context, t ident.Tenant, rows []storedb.ListUnreapedContextsRow) (map[uint64]uint32, error) {
	sweep := e.as(pgrole.Sweeper, t.ID)
	out := map[uint64]uint32{}
	note := func(id uint64) {
		if m, ok := e.index.Turns.Get(id); ok && m.Tenant == t.No {
			out[id] = m.Depth
		}
	}
	seen := map[uint64]struct{}{}
	var reached []int64
	for _, r := range rows {
		after := r.BaseTurnID
		if after == 0 && r.RootTurnID > 0 {
			after = r.RootTurnID - 1
		}
		if r.HeadTurnID > after { // else nothing was appended to it
			own, err := sweep.ContextOwnTurns(ctx, storedb.ContextOwnTurnsParams{
				TenantID: t.ID, AfterTurnID: after, HeadTurnID: r.HeadTurnID, ContextID: r.ContextID,
			})
			if err != nil {
				return nil, fmt.Errorf("list the turns of deleted context %d: %w", r.ContextID, err)
			}
			for _, id := range own {
				note(uint64(id))
			}
		}
		reached = e.chains(t, reached, seen, uint64(r.HeadTurnID), e.index.Contexts.Jumps(uint64(r.ContextID)))
	}
	for len(reached) > 0 {
		n := min(len(reached), buryTurnBatch)
		deleted, err := sweep.TurnsOfDeletedContexts(ctx, storedb.TurnsOfDeletedContextsParams{TenantID: t.ID, TurnIds: reached[:n]})
		if err != nil {
			return nil, fmt.Errorf("look up the chains of %d deleted contexts: %w", len(rows), err)
		}
		for _, id := range deleted {
			note(uint64(id))
		}
		reached = reached[n:]
	}
	return out, nil
}

// chains adds to out the turns a deleted context reached that seen does
// not hold yet: its head and its jumps (memindex.AddJump), and their
// ancestors. A turn of another deleted context that it alone kept alive
// is among them, and dies with it.
func (e *Engine) chains(t ident.Tenant, out []int64, seen map[uint64]struct{}, head uint64, jumps []uint64) []int64 {
	for _, id := range append(jumps, head) {
		for id != 0 {
			if _, ok := seen[id]; ok {
				break
			}
			// Dead turns too: what lies below them may still die.
			m, ok := e.index.Turns.Get(id)
			if !ok || m.Tenant != t.No {
				break
			}
			seen[id] = struct{}{}
			out = append(out, int64(id))
			id = m.Parent
		}
	}
	return out
}

// spareReachable removes from candidates every turn a live context of the
// tenant reaches through parent links, from its head or from any of its
// turns. A live context's own turns are never candidates, and its chains
// leave them only through its jumps (memindex.AddJump), so the walks
// start there: a context that never forked or jumped is not walked at
// all, however long its chain. Forks share their ancestors, so each turn
// is walked once; no walk goes below the lowest candidate, in depth or in
// id (a parent is older than its child, so its id is lower). It runs with
// every write paused, so what it marks is in bitsets over the ids from the
// oldest candidate up, not in maps.
func (e *Engine) spareReachable(t ident.Tenant, candidates map[uint64]uint32) {
	if len(candidates) == 0 {
		return
	}
	lowest, oldest, newest := ^uint32(0), ^uint64(0), uint64(0)
	for id, d := range candidates {
		lowest, oldest, newest = min(lowest, d), min(oldest, id), max(newest, id)
	}
	starts := e.index.Contexts.LiveJumps(t.No)
	top := newest
	for _, id := range starts {
		top = max(top, id)
	}
	isCandidate, seen := newBits(newest-oldest+1), newBits(top-oldest+1)
	for id := range candidates {
		isCandidate.set(id - oldest)
	}
	for _, start := range starts {
		for id := start; id >= oldest; {
			if seen.has(id - oldest) {
				break
			}
			m, ok := e.index.Turns.Get(id)
			if !ok || m.Depth < lowest {
				break
			}
			seen.set(id - oldest)
			if id <= newest && isCandidate.has(id-oldest) {
				delete(candidates, id)
			}
			id = m.Parent
		}
	}
}

// bits is a set of small integers.
type bits []uint64

func newBits(n uint64) bits      { return make(bits, (n+63)/64) }
func (b bits) set(i uint64)      { b[i/64] |= 1 << (i % 64) }
func (b bits) has(i uint64) bool { return b[i/64]&(1<<(i%64)) != 0 }
