// Package cardbox stores an agent's facts as cards and its context windows
// as boxes, per project (tenant), in Postgres.
//
// A card is immutable: writing the same card again is a no-op, writing the
// same id with different content is a conflict, and a deleted card stays
// deleted. A box is an ordered, mutable list of card ids of the same
// project. Reads return live cards only: a deleted or expired card reads as
// missing. A sweep.Sweeper (NewSweeper) purges expired and long-deleted
// rows.
//
// The rules that need no storage live in subpackages: rules (limits,
// validation, errors, the content hash), layout (a box's entries),
// assembly (what fits a token budget), answer (bounded answers). This
// package applies them to Postgres.
//
// The reads (GetCardsJSONWithin and the like) serve rendered cards from a
// bounded in-memory cache (package cardcache). Every read asks Postgres whether any card of
// the project changed since the cached ones were seen live (one counter,
// kept by triggers), so deletes by other processes and by plain SQL show
// at once.
//
// Every method takes the project id first; no call of one project can read
// or change another project's rows.
package cardbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/cardbox/cardcache"
	"github.com/cardboxhq/cardbox/cardbox/internal/cardboxdb"
	"github.com/cardboxhq/cardbox/cardbox/rules"
	"github.com/cardboxhq/cardbox/cardbox/sweep"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/internal/tenantgate"
)

// DefaultCardCacheBytes is the card cache's budget when
// Options.CardCacheBytes is 0.
const DefaultCardCacheBytes = 64 << 20

// DB is what the Service needs from Postgres: a *pgxpool.Pool, or a pgx.Tx
// (transactions then become savepoints).
type DB interface {
	pgrole.Batcher
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Options configure a Service.
type Options struct {
	// Now is the clock for created_at, expiry and deletion; time.Now when nil.
	Now func() time.Time
	// CardCacheBytes bounds the memory of the cache of rendered cards that
	// the JSON reads serve from: DefaultCardCacheBytes when 0, no cache
	// when negative. The caches of what assembly needs of cards and of
	// their chat messages get a quarter of it more each, and so do the
	// boxes prepared for assembly.
	CardCacheBytes int64
	// Admit, if set, is asked before every card or box write whether the
	// project may store about adding more bytes (see cardBytes and
	// boxBytes); an error refuses the write, which then writes nothing.
	// Postgres counts what is written (tenant_usage.cardbox_bytes).
	Admit func(ctx context.Context, project string, adding int64) error
}

// Service is the CardBox domain over Postgres. It is safe for concurrent use.
type Service struct {
	db  DB
	now func() time.Time
	// quota is Options.Admit; nil admits everything.
	quota func(ctx context.Context, project string, adding int64) error
	// cache holds rendered cards for the JSON reads, the facts assembly
	// needs of cards and their chat messages; nil when off. An entry is
	// stamped with the project's change counter when a read last saw the
	// card live (see liveJSON).
	cache *cardcache.Cache
	// prepared holds the candidates of recent assemblies with the
	// versions they are current at (see prepared.go); nil when off.
	prepared *preparedCache
	// projects records project ids known to exist, to skip EnsureTenant.
	projects sync.Map
	// gate admits the writes that add rows, per project; a deleted
	// project's is closed (see ForgetProject).
	gate tenantgate.Gate[string]
}

// New returns a Service over d.
func New(d DB, opts Options) *Service {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	size := opts.CardCacheBytes
	if size == 0 {
		size = DefaultCardCacheBytes
	}
	return &Service{db: d, now: now, quota: opts.Admit, cache: cardcache.New(size), prepared: newPreparedCache(size / 4)}
}

// Card is a stored card.
type Card struct {
	ProjectID  string
	CardID     string
	Content    json.RawMessage // nil when null
	ToolCalls  json.RawMessage // nil when null
	ToolCallID string
	TTLSeconds int // 0: never expires
	Metadata   json.RawMessage
	// Type, Role and AuthorID are metadata.type, metadata.role and
	// metadata.author_id.
	Type, Role, AuthorID string
	CreatedAt            time.Time
	ExpiresAt            *time.Time
	// DeletedAt is set only on cards returned by AddCards for a replay of
	// a deleted card; reads never return deleted cards.
	DeletedAt *time.Time
}

// NewCard is a card to write.
type NewCard struct {
	// CardID is the card's id in the project; AddCards generates a UUIDv7
	// when it is empty.
	CardID string
	// Content is any JSON value.
	Content json.RawMessage
	// ToolCalls is a JSON array or null.
	ToolCalls  json.RawMessage
	ToolCallID string
	// TTLSeconds makes the card expire that long after it is created; 0
	// means never.
	TTLSeconds int
	// Metadata is a JSON object with type (a standard type or a custom type
	// namespaced with a dot) and role (system, user, assistant or tool;
	// optional for standard types, which have a default role).
	Metadata json.RawMessage
}

// Box is a stored box.
type Box struct {
	ProjectID string
	BoxID     string
	CardIDs   []string
	ParentIDs []string
	Metadata  json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// BoxInput is the content of a box to save.
type BoxInput struct {
	// CardIDs must name live cards of the project.
	CardIDs []string
	// ParentIDs name the boxes this one was derived from.
	ParentIDs []string
	// Metadata is a JSON object or null.
	Metadata json.RawMessage
}

// as returns the queries of a request of project: row-level security
// holds them to its rows.
func (s *Service) as(project string) *cardboxdb.Queries {
	return cardboxdb.New(pgrole.As(s.db, pgrole.Tenant, project))
}

// NewSweeper returns a Sweeper over the service's database and clock.
func (s *Service) NewSweeper(cfg sweep.Config) *sweep.Sweeper {
	return sweep.New(s.db, s.now, cfg)
}

// admit lets in a write that adds rows to project, creating the project
// on its first write (dev mode); the caller calls s.gate.Leave when done.
// A deleted project is a conflict: its id is not used again.
func (s *Service) admit(ctx context.Context, project string) error {
	if !s.gate.Enter(project) {
		return deletedProject(project)
	}
	if err := s.ensureProject(ctx, project); err != nil {
		s.gate.Leave()
		return err
	}
	return nil
}

func deletedProject(project string) error {
	return fmt.Errorf("project %q was deleted, and a deleted project's id is not used again: %w", project, rules.ErrConflict)
}

// ensureProject creates the project on its first write (dev mode).
func (s *Service) ensureProject(ctx context.Context, project string) error {
	if _, ok := s.projects.Load(project); ok {
		return nil
	}
	row, err := s.as(project).EnsureTenant(ctx, project)
	if isNoRows(err) {
		// A concurrent first write created the project after this
		// statement's snapshot; a new statement sees it.
		row, err = s.as(project).EnsureTenant(ctx, project)
	}
	if err != nil {
		return fmt.Errorf("ensure project %q: %w", project, err)
	}
	if row.Deleted {
		return deletedProject(project)
	}
	s.projects.Store(project, struct{}{})
	return nil
}

// ForgetProject makes the service forget a project deleted in Postgres
// (tenancy.Admin.DeleteTenant, from any process): it waits for the writes in
// flight that add rows to it, refuses them from then on, and drops its
// cached cards. Rows the last writes added after the deletion are the
// caller's to purge once this returns (tenancy.Admin.PurgeDeleted).
func (s *Service) ForgetProject(project string) {
	s.gate.Close(project)
	s.projects.Delete(project)
	s.cache.DropProject(project)
}

// admitWrite asks Options.Admit whether project may store adding more
// bytes.
func (s *Service) admitWrite(ctx context.Context, project string, adding int64) error {
	if s.quota == nil {
		return nil
	}
	return s.quota(ctx, project, adding)
}

// cardBytes is about what a card adds to its project's storage: its id,
// JSON and tool call id (Postgres counts the JSON as it renders it, with
// a space after each ':' and ',').
func cardBytes(cards []normalCard) int64 {
	var n int
	for _, c := range cards {
		n += len(c.ID) + len(c.Content) + len(c.ToolCalls) + len(c.ToolCallID) + len(c.Metadata)
	}
	return int64(n)
}

// idBytes is the length of ids together.
func idBytes(ids []string) int64 {
	var n int
	for _, id := range ids {
		n += len(id)
	}
	return int64(n)
}

// boxBytes is what a box holds: its id, card ids, parent ids and metadata.
func boxBytes(boxID string, in BoxInput, meta []byte) int64 {
	return int64(len(boxID)+len(meta)) + idBytes(in.CardIDs) + idBytes(in.ParentIDs)
}

// checkProject validates a project id.
func checkProject(project string) error {
	return rules.ValidateID("project_id", project)
}

// inTx runs fn in a transaction, committing when fn returns nil.
func (s *Service) inTx(ctx context.Context, project string, fn func(q *cardboxdb.Queries) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(cardboxdb.New(pgrole.As(tx, pgrole.Tenant, project))); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// isNoRows reports a query that found nothing.
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
