package service

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/ctxmeta"
	"github.com/cardboxhq/cardbox/cxdbcompat/live"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/metastore"
)

// metadataQueueSize bounds the first turns waiting for extraction; past
// it they are left to the catch-up, which finds them in Postgres.
const metadataQueueSize = 4096

// catchUpBatch is how many contexts one catch-up query takes.
const catchUpBatch = 500

// metadataRetry is how long the worker waits after Postgres failed it.
const metadataRetry = time.Second

// metadataWorker extracts the metadata of first turns off the append
// path. An append commits without it; a crash before it is saved leaves
// the context marked as not done, and the catch-up at start (or after an
// overflow) extracts it then.
type metadataWorker struct {
	s        *Service
	pending  chan store.Appended
	overflow atomic.Bool
}

func newMetadataWorker(s *Service) *metadataWorker {
	return &metadataWorker{s: s, pending: make(chan store.Appended, metadataQueueSize)}
}

func (w *metadataWorker) queue(a store.Appended) {
	select {
	case w.pending <- a:
	default:
		w.overflow.Store(true)
	}
}

func (w *metadataWorker) run(ctx context.Context) error {
	w.catchUp(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case a := <-w.pending:
			if err := w.extract(ctx, a.Tenant, a.TurnID, a.ContextID); err != nil {
				w.s.log.Warn("extract context metadata; the catch-up retries", "context", a.ContextID, "err", err)
				w.overflow.Store(true)
			}
		}
		if len(w.pending) == 0 && w.overflow.Swap(false) {
			w.catchUp(ctx)
		}
	}
}

// catchUp extracts the metadata of every context still without it.
func (w *metadataWorker) catchUp(ctx context.Context) {
	for ctx.Err() == nil {
		todo, err := w.s.metas.ContextsWithoutMetadata(ctx, catchUpBatch)
		if err != nil {
			w.s.log.Warn("list contexts without metadata", "err", err)
			w.overflow.Store(true)
			sleep(ctx, metadataRetry)
			return
		}
		for _, p := range todo {
			info, err := w.s.Context(p.Tenant, p.ContextID)
			if err != nil {
				continue
			}
			if err := w.extract(ctx, p.Tenant, w.s.Root(p.Tenant, info.TurnID), p.ContextID); err != nil {
				w.s.log.Warn("extract context metadata", "context", p.ContextID, "err", err)
				w.overflow.Store(true)
				return
			}
		}
		if len(todo) < catchUpBatch {
			return
		}
	}
}

// extract reads root's payload, saves what metadata it has and links the
// context to it; it publishes context_metadata_updated when there is some.
func (w *metadataWorker) extract(ctx context.Context, t ident.Tenant, root, contextID uint64) error {
	var found *ctxmeta.Metadata
	if payload, err := w.s.TurnPayload(ctx, t, root); err == nil {
		if m, ok := ctxmeta.Extract(payload); ok {
			found = &m
		}
	} else if fault.KindOf(err) == fault.Unavailable {
		return err
	}
	// An unreadable payload has no metadata; the context is done.
	err := w.s.metas.SaveRootMetadata(ctx, t, root, []uint64{contextID}, toStored(found))
	if fault.KindOf(err) == fault.NotFound {
		return nil // the tenant was deleted: nothing to do
	}
	if err != nil {
		return err
	}
	if found != nil {
		w.s.hub.Stream.Publish(t.ID, live.ContextMetadataUpdated, metadataEvent(contextID, found))
	}
	return nil
}

func toStored(m *ctxmeta.Metadata) *metastore.ContextMeta {
	if m == nil {
		return nil
	}
	out := &metastore.ContextMeta{ClientTag: m.ClientTag, Title: m.Title, Labels: m.Labels}
	if m.Provenance != nil {
		out.Provenance, _ = json.Marshal(m.Provenance)
	}
	return out
}

func metadataEvent(contextID uint64, m *ctxmeta.Metadata) map[string]any {
	ev := map[string]any{"context_id": idString(contextID), "has_provenance": m.Provenance != nil}
	if m.ClientTag != nil {
		ev["client_tag"] = *m.ClientTag
	}
	if m.Title != nil {
		ev["title"] = *m.Title
	}
	if m.Labels != nil {
		ev["labels"] = m.Labels
	}
	return ev
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
