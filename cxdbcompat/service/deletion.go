package service

import (
	"context"

	"github.com/cardboxhq/cardbox/cxdbcompat/live"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// ContextDeleter deletes contexts (*store.Engine); part of Store.
type ContextDeleter interface {
	DeleteContext(ctx context.Context, t ident.Tenant, id uint64, actor string) error
	Dead(turnID uint64) bool
}

// DeleteContext deletes a context of the tenant on behalf of actor (who
// the audit log names: "key:ID", "retention"), drops the rendered turns
// of the turns that died with it, and publishes context_deleted.
func (s *Service) DeleteContext(ctx context.Context, t ident.Tenant, id uint64, actor string) error {
	if err := s.Store.DeleteContext(ctx, t, id, actor); err != nil {
		return err
	}
	s.rendered.DropIf(func(k renderKey) bool { return k.tenant == t.No && s.Store.Dead(k.turn) })
	s.hub.Stream.Publish(t.ID, live.ContextDeleted, map[string]any{
		"context_id": idString(id), "deleted_at": s.now().UnixMilli(),
	})
	return nil
}
