// Package service is the CXDB domain over the turn store, shared by the
// binary protocol and the CXDB HTTP API: type registries per tenant, the
// turns a page selects, context listings with first-turn metadata, CQL search, fs
// browsing, JSON appends, and the live events every write publishes
// whichever surface it came in on. Wire formats and SQL stay outside: the
// codecs and rules live in the sibling packages (registry, projection,
// ctxmeta, cql, typedjson, fstree; turnpage renders the selected turns as
// the HTTP API's turn objects), the bytes and rows in package store
// and, for registries and context metadata, store/metastore.
package service

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/live"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pace"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/metastore"
)

// Store is what the service needs of the turn store (*store.Engine); the
// registry bundles and context metadata it keeps in a metastore.Store.
// Deleting contexts and finding those retention expires are part of it,
// so that a store without them (a test's wrapper) fails to compile rather
// than at the first deletion.
type Store interface {
	store.TurnStore
	ContextDeleter
	RetentionStore
	Contexts(t ident.Tenant) []store.ContextInfo
	Context(t ident.Tenant, id uint64) (store.ContextInfo, error)
	TurnInfo(t ident.Tenant, id uint64) (store.Turn, bool)
	Root(t ident.Tenant, id uint64) uint64
	OnChain(t ident.Tenant, contextID, id uint64) bool
	TurnPayload(ctx context.Context, t ident.Tenant, id uint64) ([]byte, error)
	GetBlobWithin(ctx context.Context, t ident.Tenant, h ident.Hash, room func(n int64) error) ([]byte, error)
	MissingBlobs(ctx context.Context, t ident.Tenant, hashes []ident.Hash) ([]ident.Hash, error)
	FSRoot(ctx context.Context, t ident.Tenant, id uint64) (root ident.Hash, from uint64, ok bool, err error)
}

// Options configure a Service.
type Options struct {
	// Hub receives the events; a new one when nil.
	Hub    *live.Hub
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// OnPublish, if set, is told of every bundle a tenant published that
	// changed its registry, once the registry serves it. It must not
	// block (SQL analytics queues a re-projection).
	OnPublish func(ident.Tenant)
	// DefaultRetention is the server's retention policy for the tenants
	// without one of their own for all their contexts (SweepRetention);
	// zero: none.
	DefaultRetention store.DefaultRetention
	// RetentionDeleteBatch is how many of a tenant's expired contexts the
	// retention sweeper deletes at once (SweepRetention);
	// DefaultRetentionDeleteBatch when 0.
	RetentionDeleteBatch int
	// RetentionPace is the share of the time the retention sweeper works
	// while it has work, shared with the reaper of deleted contexts
	// (store.Options.ReapPace): after each lookup and each batch of
	// deletions it rests in proportion (internal/pace); nil: it never
	// rests.
	RetentionPace *pace.Budget
}

// Service is the CXDB domain. It is a store.TurnStore itself: creating a
// context through it publishes context_created and remembers the creating
// session; appends pass through (the store tells Appended of them).
type Service struct {
	Store
	metas *metastore.Store
	hub   *live.Hub
	log   *slog.Logger
	now   func() time.Time

	onPublish        func(ident.Tenant)
	defaultRetention store.DefaultRetention
	// retentionDeleteBatch is Options.RetentionDeleteBatch.
	retentionDeleteBatch int
	// retentionPace is Options.RetentionPace.
	retentionPace *pace.Budget
	// onContextDeleted are told of each deleted context (OnContextDeleted).
	onContextDeleted []func(t ident.Tenant, dead func(turnID uint64) bool)

	regMu      sync.Mutex
	registries map[string]*tenantRegistry

	meta *metadataWorker
}

// tenantRegistry is a tenant's registry snapshot; publish serialises the
// tenant's publishes.
type tenantRegistry struct {
	publish sync.Mutex
	mu      sync.RWMutex
	reg     *registry.Registry
	loaded  bool
}

// New returns a service over st, keeping registries and context metadata
// in metas. Run its background work with Run.
func New(st Store, metas *metastore.Store, opts Options) *Service {
	if opts.Hub == nil {
		opts.Hub = live.NewHub(0)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Service{
		Store: st, metas: metas, hub: opts.Hub, log: opts.Logger, now: opts.Now, onPublish: opts.OnPublish,
		defaultRetention: opts.DefaultRetention, retentionDeleteBatch: cmp.Or(max(opts.RetentionDeleteBatch, 0), DefaultRetentionDeleteBatch),
		retentionPace: opts.RetentionPace,
		registries:    map[string]*tenantRegistry{},
	}
	s.meta = newMetadataWorker(s)
	return s
}

// ForgetTenant drops what the service keeps of a deleted tenant: its type
// registry and its buffered events. The store forgets the rest
// (store.Engine.ForgetTenant), turnpage.Pages its rendered turns.
func (s *Service) ForgetTenant(t ident.Tenant) {
	s.regMu.Lock()
	delete(s.registries, t.ID)
	s.regMu.Unlock()
	s.hub.Stream.Forget(t.ID)
}

// MetaStore is where the service keeps registry bundles and context
// metadata.
func (s *Service) MetaStore() *metastore.Store { return s.metas }

// Hub is the service's live state.
func (s *Service) Hub() *live.Hub { return s.hub }

// Run extracts context metadata off the append path until ctx ends: the
// first turns appended since, and at start the contexts a crash or an
// older version left without.
func (s *Service) Run(ctx context.Context) error { return s.meta.run(ctx) }

// CreateContext creates (or, with a base turn, forks) a context, makes its
// chain's metadata its own, and publishes context_created.
func (s *Service) CreateContext(ctx context.Context, t ident.Tenant, baseTurnID uint64, clientTag string) (store.Head, error) {
	h, err := s.Store.CreateContext(ctx, t, baseTurnID, clientTag)
	if err != nil {
		return h, err
	}
	if root := s.Root(t, baseTurnID); root != 0 {
		if err := s.metas.SaveRootMetadata(ctx, t, root, []uint64{h.ContextID}, nil); err != nil {
			// The start-up catch-up links it later; the fork exists.
			s.log.Warn("link forked context to its chain's metadata", "context", h.ContextID, "err", err)
		}
	}
	data := map[string]any{"context_id": idString(h.ContextID), "created_at": s.now().UnixMilli(), "client_tag": clientTag}
	if sess, ok := live.SessionFrom(ctx); ok {
		s.hub.Created(sess.ID, h.ContextID)
		data["session_id"] = idString(sess.ID)
	}
	s.hub.Stream.Publish(t.ID, live.ContextCreated, data)
	return h, nil
}

// turnAppendedEvent is the data of turn_appended. Subscribers render it;
// publishing, on the committer's goroutine, only stores it.
type turnAppendedEvent struct {
	a store.Appended
}

// MarshalJSON renders the reference's fields, ids as strings.
func (e turnAppendedEvent) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{
		"context_id": idString(e.a.ContextID), "turn_id": idString(e.a.TurnID),
		"parent_turn_id": idString(e.a.ParentID), "depth": e.a.Depth,
		"declared_type_id": e.a.TypeID, "declared_type_version": e.a.TypeVersion,
	})
}

// Appended publishes turn_appended for committed turns and queues first
// turns for metadata extraction. It is the store's Options.OnAppend: it
// does not block, and leaves rendering the events to their readers.
func (s *Service) Appended(turns []store.Appended) {
	for _, a := range turns {
		s.hub.Stream.Publish(a.Tenant.ID, live.TurnAppended, turnAppendedEvent{a})
		if a.Depth == 1 {
			s.meta.queue(a)
		}
	}
}
