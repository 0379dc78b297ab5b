package service

import (
	"context"
	"fmt"
	"time"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store"
)

// RetentionActor is who the audit log names for the contexts retention
// policies delete.
const RetentionActor = "retention"

// retentionBatch is how many expired contexts one pass looks up at once.
const retentionBatch = 500

// DefaultRetentionDeleteBatch is how many of a tenant's expired contexts
// the sweeper deletes at once when Options.RetentionDeleteBatch is 0:
// each batch pauses every tenant's appends once, for its deletion and the
// working out of its dead turns (store.Engine.DeleteContexts), where
// deleting the contexts one by one paused them twice per context.
const DefaultRetentionDeleteBatch = 100

// RetentionStore finds the contexts retention policies expire
// (*store.Engine); part of Store.
type RetentionStore interface {
	ExpiredContexts(ctx context.Context, now time.Time, def store.DefaultRetention, max int) ([]store.ExpiredContext, error)
	DeleteExpiredContexts(ctx context.Context, t ident.Tenant, expired []store.ExpiredContext, actor string) ([]uint64, error)
}

// SweepRetention deletes every context its tenant's retention policies
// (or the server's default, Options.DefaultRetention, for a tenant without
// a policy for all its contexts) expire at the service's clock's now, and
// returns how many it deleted. It looks them up a batch at a time and
// deletes each tenant's in groups of Options.RetentionDeleteBatch, as
// DeleteContexts does: subscribers get context_deleted and the reaper
// buries the dead turns. After each lookup and each group it rests, so
// that it works Options.RetentionShare of the time.
func (s *Service) SweepRetention(ctx context.Context) (int, error) {
	now := s.now()
	deleted := 0
	for {
		// The lookup scans the live contexts: it is paced too.
		var batch []store.ExpiredContext
		err := s.retentionPace.Step(ctx, func() (err error) {
			batch, err = s.Store.ExpiredContexts(ctx, now, s.defaultRetention, retentionBatch)
			return err
		})
		if err != nil {
			return deleted, err
		}
		listed, progress := len(batch), 0
		for len(batch) > 0 {
			n := 1
			for n < len(batch) && n < s.retentionDeleteBatch && batch[n].Tenant.ID == batch[0].Tenant.ID {
				n++
			}
			tenant := batch[0].Tenant
			var gone []uint64
			err := s.retentionPace.Step(ctx, func() (err error) {
				gone, err = s.deleteContexts(tenant, func() ([]uint64, error) {
					return s.Store.DeleteExpiredContexts(ctx, tenant, batch[:n], RetentionActor)
				})
				return err
			})
			if err != nil {
				return deleted + len(gone), fmt.Errorf("delete %d expired contexts of tenant %q: %w", n, tenant.ID, err)
			}
			// Ids left out were deleted meanwhile, or their tenant was, or
			// were appended to since the lookup.
			deleted += len(gone)
			progress += len(gone)
			batch = batch[n:]
		}
		// A batch that deleted nothing would come back the same: stop, and
		// leave what did not go to the next pass.
		if listed < retentionBatch || progress == 0 {
			return deleted, nil
		}
	}
}

// RunRetention sweeps at once and then every interval until ctx ends
// (SweepRetention); a failed pass is logged and tried again at the next
// tick. It returns nil once ctx ends.
func (s *Service) RunRetention(ctx context.Context, interval time.Duration) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		n, err := s.SweepRetention(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.log.Error("retention sweep failed", "err", err, "deleted", n)
		case n > 0:
			s.log.Info("retention sweep", "contexts_deleted", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
