package service

import (
	"context"

	"github.com/cardboxhq/cardbox/cxdbcompat/live"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// ContextDeleter deletes contexts (*store.Engine); part of Store.
type ContextDeleter interface {
	DeleteContext(ctx context.Context, t ident.Tenant, id uint64, actor string) error
	DeleteContexts(ctx context.Context, t ident.Tenant, ids []uint64, actor string) ([]uint64, error)
	Dead(turnID uint64) bool
}

// OnContextDeleted has fn told of every context the service deletes, with
// the tenant and a test of which turns died with it (for caches of turns,
// such as rendered pages). Call it before the service serves.
func (s *Service) OnContextDeleted(fn func(t ident.Tenant, dead func(turnID uint64) bool)) {
	s.onContextDeleted = append(s.onContextDeleted, fn)
}

// DeleteContext deletes a context of the tenant on behalf of actor (who
// the audit log names: "key:ID", "retention"), tells those registered with
// OnContextDeleted, and publishes context_deleted.
func (s *Service) DeleteContext(ctx context.Context, t ident.Tenant, id uint64, actor string) error {
	if err := s.Store.DeleteContext(ctx, t, id, actor); err != nil {
		return err
	}
	for _, fn := range s.onContextDeleted {
		fn(t, s.Store.Dead)
	}
	s.hub.Stream.Publish(t.ID, live.ContextDeleted, map[string]any{
		"context_id": idString(id), "deleted_at": s.now().UnixMilli(),
	})
	return nil
}

// DeleteContexts deletes contexts of the tenant as DeleteContext deletes
// each, all at once (store.Engine.DeleteContexts: one pause of the write
// gate for all), and returns the ids it deleted; ids of no live context
// are left out.
func (s *Service) DeleteContexts(ctx context.Context, t ident.Tenant, ids []uint64, actor string) ([]uint64, error) {
	return s.deleteContexts(t, func() ([]uint64, error) { return s.Store.DeleteContexts(ctx, t, ids, actor) })
}

// deleteContexts runs del, which deletes contexts of the tenant and
// returns those it deleted, and tells of them as DeleteContexts does.
func (s *Service) deleteContexts(t ident.Tenant, del func() ([]uint64, error)) ([]uint64, error) {
	deleted, err := del()
	if err != nil || len(deleted) == 0 {
		return deleted, err
	}
	for _, fn := range s.onContextDeleted {
		fn(t, s.Store.Dead)
	}
	at := s.now().UnixMilli()
	for _, id := range deleted {
		s.hub.Stream.Publish(t.ID, live.ContextDeleted, map[string]any{"context_id": idString(id), "deleted_at": at})
	}
	return deleted, nil
}
