package service

import (
	"context"
	"fmt"
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/store"
)

// RetentionActor is who the audit log names for the contexts retention
// policies delete.
const RetentionActor = "retention"

// retentionBatch is how many expired contexts one pass looks up at once;
// each is deleted as DELETE /v1/contexts/{id} would, so appends wait for
// no more than one deletion's quiescence at a time.
const retentionBatch = 500

// RetentionStore finds the contexts retention policies expire
// (*store.Engine); part of Store.
type RetentionStore interface {
	ExpiredContexts(ctx context.Context, now time.Time, def store.DefaultRetention, max int) ([]store.ExpiredContext, error)
}

// SweepRetention deletes every context its tenant's retention policies
// (or the server's default, Options.DefaultRetention, for a tenant without
// a policy for all its contexts) expire at the service's clock's now, a
// batch at a time, and returns how
// many it deleted. Each deletion is DeleteContext's: subscribers get
// context_deleted and the reaper buries the dead turns.
func (s *Service) SweepRetention(ctx context.Context) (int, error) {
	now := s.now()
	deleted := 0
	for {
		batch, err := s.Store.ExpiredContexts(ctx, now, s.defaultRetention, retentionBatch)
		if err != nil {
			return deleted, err
		}
		progress := 0
		for _, c := range batch {
			err := s.DeleteContext(ctx, c.Tenant, c.ContextID, RetentionActor)
			switch {
			case err == nil:
				deleted++
				progress++
			case fault.KindOf(err) == fault.NotFound:
				// Deleted meanwhile, or its tenant was.
			default:
				return deleted, fmt.Errorf("delete expired context %d of tenant %q: %w", c.ContextID, c.Tenant.ID, err)
			}
		}
		// A batch that deleted nothing would come back the same: stop, and
		// leave what did not go to the next pass.
		if len(batch) < retentionBatch || progress == 0 {
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
