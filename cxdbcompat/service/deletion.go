package service

import (
	"context"

	"github.com/cardboxhq/cardbox/cxdbcompat/live"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// ContextDeleter deletes contexts (*store.Engine).
type ContextDeleter interface {
	DeleteContext(ctx context.Context, t ident.Tenant, id uint64) error
	Dead(turnID uint64) bool
}

// OnContextDeleted has fn told of every context the service deletes, with
// the tenant and a test of which turns died with it (for caches of turns,
// such as rendered pages). Call it before the service serves.
func (s *Service) OnContextDeleted(fn func(t ident.Tenant, dead func(turnID uint64) bool)) {
	s.onContextDeleted = append(s.onContextDeleted, fn)
}

// DeleteContext deletes a context of the tenant, tells those registered
// with OnContextDeleted, and publishes context_deleted. The store must be
// a ContextDeleter.
func (s *Service) DeleteContext(ctx context.Context, t ident.Tenant, id uint64) error {
	d := s.Store.(ContextDeleter)
	if err := d.DeleteContext(ctx, t, id); err != nil {
		return err
	}
	for _, fn := range s.onContextDeleted {
		fn(t, d.Dead)
	}
	s.hub.Stream.Publish(t.ID, live.ContextDeleted, map[string]any{
		"context_id": idString(id), "deleted_at": s.now().UnixMilli(),
	})
	return nil
}
