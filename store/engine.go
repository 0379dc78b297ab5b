package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pace"
	"github.com/cardboxhq/cardbox/internal/pgbound"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/internal/tenantgate"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/compact"
	"github.com/cardboxhq/cardbox/store/idemindex"
	"github.com/cardboxhq/cardbox/store/internal/claimwatch"
	"github.com/cardboxhq/cardbox/store/internal/damage"
	"github.com/cardboxhq/cardbox/store/internal/deadspace"
	"github.com/cardboxhq/cardbox/store/internal/dedupfence"
	"github.com/cardboxhq/cardbox/store/internal/groupcommit"
	"github.com/cardboxhq/cardbox/store/internal/holerecorder"
	"github.com/cardboxhq/cardbox/store/internal/inflight"
	"github.com/cardboxhq/cardbox/store/internal/memindex"
	"github.com/cardboxhq/cardbox/store/internal/putmemo"
	"github.com/cardboxhq/cardbox/store/internal/sealer"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/internal/usage"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// Options configure an Engine.
type Options struct {
	// Dir is the data directory: Dir/blobs holds the pack, Dir/turns the
	// turn log, Dir/STORE_ID ties the directory to its database.
	Dir string
	// Pool is the Postgres pool; its database must be migrated.
	Pool *pgxpool.Pool
	// MaxBatch caps how many appends one group commit takes (default 1024).
	MaxBatch int
	// FileReserve is how many bytes of zeros the blob pack and the turn
	// log keep written ahead of their ends, so that the fdatasync of every
	// group commit flushes data only, not a new size or new blocks
	// (default DefaultFileReserve; negative: none).
	FileReserve int64
	// SegmentSize bounds the segments of the blob pack and the turn log
	// (see docs/storage.md, Segments): a group's write that would take a
	// file's last segment past it starts the next segment, and a closed
	// segment is sealed once committed. Zero: one unbounded segment
	// each, blobs.pack and turns.log.
	SegmentSize int64
	// MaxIdempotencyKeys caps the idempotency keys held in memory
	// (default DefaultMaxIdempotencyKeys); Postgres answers for older
	// keys of the window.
	MaxIdempotencyKeys int
	// ReapPace is the share of the time the background reaper of deleted
	// contexts and its release of blob claims work while they have work,
	// shared with the retention sweeper: after each batch it rests in
	// proportion (internal/pace); nil: it never rests. The reaping at
	// start, before the store serves, does not rest.
	ReapPace *pace.Budget
	// OnAppend, if set, is told of every group of turns once they are
	// committed and readable, in commit order, from the committer (its
	// finisher, or the goroutine that found out late that a group whose
	// COMMIT went unanswered did commit): it must return quickly (queue,
	// don't work).
	OnAppend func([]Appended)
	// OnAppendPayloads is the largest payload handed to OnAppend with its
	// turn (Appended.Payload), for a listener that would otherwise read
	// it back from the blob pack; 0: none.
	OnAppendPayloads int
	// Quota, if set, is asked before every write that adds to a tenant's
	// storage (appends, blob puts, fs attachments, contexts, registry
	// bundles) and may refuse it; nil: no quotas.
	Quota QuotaFunc
	// FSTree decodes the fs tree objects of the roots attached to turns,
	// which must be whole (see checkFSRoot); nil: attaching an fs root is
	// refused as unprocessable.
	FSTree FSTreeDecoder
	// PGTimeout bounds how long a request waits for Postgres (default
	// DefaultPGTimeout): each statement a request sends, and an append's
	// group from when the append was queued to its COMMIT's answer. An
	// append whose group does not finish in time is answered unavailable
	// (503) and its group's outcome is resolved afterwards (see
	// groupcommit.Committer). Start-up recovery and background work
	// are not bounded.
	PGTimeout time.Duration
	// BlobClaimGrace is how long an upload (PUT_BLOB) or a grant keeps a
	// tenant's claim to a blob nothing else of the tenant needs, when the
	// reaper releases claims after a context deletion (default
	// DefaultBlobClaimGrace): a client may upload before it appends or
	// attaches.
	BlobClaimGrace time.Duration
	// Now is the clock of idempotency keys and their expiry, and of blob
	// uploads' grace (time.Now when nil).
	Now    func() time.Time
	Logger *slog.Logger
	// CompactionHook, if set, is called after each step of a compaction
	// (see package compact); an error from it stops the compaction there,
	// with nothing undone, as a crash at that point would. For crash
	// tests.
	CompactionHook func(compact.Step) error
	// CompactionLimiter, if set, bounds the bytes per second compactions
	// read and write (cardboxd --compaction-rate).
	CompactionLimiter compact.Limiter
	// hooks are test-only fault injection points (see groupcommit.Hooks).
	hooks *groupcommit.Hooks
	// putFound, if set, runs in PutBlob once it found the blob stored,
	// before it claims it; dedupWaits, when a compaction of the pack
	// waits for the deduplications in flight (dedupfence.Fence.Blocked).
	// For tests.
	putFound   func(ident.Hash)
	dedupWaits func()
	// beforeRelease, if set, is called by a release of blob claims once
	// it has worked out what to release, before it commits (tests).
	beforeRelease func()
	// afterMarkDeleted, if set, is called by DeleteContexts once the
	// contexts are marked deleted in Postgres, before they leave memory
	// and their dead turns are worked out (tests).
	afterMarkDeleted func()
}

// DefaultFileReserve is the default Options.FileReserve.
const DefaultFileReserve = 4 << 20

// DefaultPGTimeout is the default Options.PGTimeout.
const DefaultPGTimeout = pgbound.DefaultTimeout

func (o Options) fileReserve() int64 {
	if o.FileReserve == 0 {
		return DefaultFileReserve
	}
	return max(o.FileReserve, 0)
}

// Engine is the TurnStore on local files and Postgres.
type Engine struct {
	opts    Options
	log     *slog.Logger
	pool    *pgxpool.Pool
	storeID pgtype.UUID // pgx encodes its own UUID type without reflection

	blobs *blobpack.Pack
	turns *turnlog.Log

	// index is what is committed, in memory; it hides the tenants gate
	// closed.
	index   *memindex.Index
	tenants *tenantCache
	trees   wholeTrees // fs trees found whole (see checkFSRoot)
	// gate admits writes of live tenants; a deleted tenant's is closed
	// (see ForgetTenant), and reads check it too.
	gate  tenantgate.Gate[uint32]
	usage *usage.Ledger // what tenants store beyond the blobs the pack counts
	puts  *putmemo.Memo // uploads recorded lately in blob_puts (see recordPut)
	// claims notes the blobs a tenant's writes may make it need while a
	// release of its claims is worked out (see claimwatch)
	claims claimwatch.Watch
	// damaged counts and logs the turns served without their damaged
	// payloads (see Turn.PayloadDamaged).
	damaged damage.Served
	// lost are the committed payloads recovery found missing from the
	// pack, by tenant (see damage.Lost); holes queues the records found
	// damaged when read until pack_holes has them.
	lost  damage.Lost
	holes *holerecorder.Recorder
	// sealer seals closed segments of the files (see segments.go).
	sealer *sealer.Sealer

	committer *groupcommit.Committer
	// idem is the in-memory index of idempotency keys, which the
	// committer keeps current.
	idem *idemindex.Table
	// keyLookups asks Postgres about the keys idem may have forgotten.
	keyLookups keyLookups

	// stopPurge ends the goroutine that purges expired idempotency keys;
	// purgeDone closes when it has.
	stopPurge context.CancelFunc
	purgeDone chan struct{}

	// The reaper works out the turns that died with deleted contexts (see
	// ReapDeleted), woken by reapWake, until stopReaper; the index hides
	// the dead turns (memindex.Index.Dead).
	reapMu sync.Mutex // one reaping at a time
	// deleting tracks the deletions of contexts in flight (see
	// DeleteContexts): the reaper reaps no deleted context it listed
	// while one was.
	deleting   inflight.Tracker
	reapWake   chan struct{}
	stopReaper context.CancelFunc
	reaperDone chan struct{}

	// dedup counts the puts and append groups that may have found a
	// blob stored and not yet committed their claim to it, which a
	// compaction of the pack waits for (see packCompaction.Dead).
	dedup dedupfence.Fence

	// compactMu runs one compaction at a time, and Close waits for it;
	// closed, set under it, refuses compactions after Close.
	compactMu sync.Mutex
	closed    atomic.Bool
	// deadTurns counts the dead bytes of the turn log's segments (see
	// deadspace.go).
	deadTurns *deadspace.Tracker
	// deadBlobs counts the bytes of the blob pack's segments that may be
	// dead (see deadspace.go).
	deadBlobs *deadspace.Tracker
	// deaths holds, during recovery only, when the dead turns died and
	// when the deleted tenants were deleted.
	deaths *deadspace.Deaths

	closeOnce sync.Once
	closeErr  error
}

var _ TurnStore = (*Engine)(nil)

// Open recovers the files, reconciles them with Postgres, loads the
// in-memory index and starts the committer.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if opts.Pool == nil {
		return nil, errors.New("store: Options.Pool is required")
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 1024
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PGTimeout <= 0 {
		opts.PGTimeout = DefaultPGTimeout
	}
	e := &Engine{
		opts: opts, log: opts.Logger, pool: opts.Pool,
		tenants: newTenantCache(storedb.New(pgrole.As(pgbound.Batcher{D: opts.Pool, Timeout: opts.PGTimeout}, pgrole.Lookup, ""))), usage: usage.New(), puts: putmemo.New(0),
		sealer: sealer.New(), deadTurns: deadspace.New(), deadBlobs: deadspace.New(),
	}
	e.holes = holerecorder.New(func(ctx context.Context, h blobpack.Hole) error {
		return e.recordHole(ctx, h, opts.PGTimeout)
	}, opts.Logger)
	e.index = memindex.New(&e.gate)
	e.dedup.Blocked = opts.dedupWaits
	if err := e.recover(ctx); err != nil {
		_ = e.closeFiles() // the recovery's error is the one to report
		return nil, fmt.Errorf("open store in %s: %w", opts.Dir, err)
	}
	e.startPurge()
	e.startReaper()
	e.holes.Start()
	e.startSealer()
	// Deletions a crash interrupted are finished before the store serves:
	// their dead turns are known only once worked out again, and until
	// then a fork could take one.
	if _, err := e.ReapDeleted(ctx); err != nil {
		_ = e.Close() // the reaping's error is the one to report
		return nil, fmt.Errorf("open store in %s: reap deleted contexts: %w", opts.Dir, err)
	}
	return e, nil
}

func (e *Engine) now() time.Time { return e.opts.Now() }

// Close stops the committer after the queued appends are answered and
// closes the files. It does not close the pool.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		if e.stopPurge != nil {
			e.stopPurge()
			<-e.purgeDone
		}
		if e.stopReaper != nil {
			e.stopReaper()
			<-e.reaperDone
		}
		if e.committer != nil {
			e.committer.Stop()
		}
		e.holes.Stop()
		e.sealer.Stop()
		e.compactMu.Lock()
		e.closed.Store(true)
		e.compactMu.Unlock()
		e.closeErr = e.closeFiles()
	})
	return e.closeErr
}

func (e *Engine) closeFiles() error {
	var errs []error
	if e.turns != nil {
		errs = append(errs, e.turns.Close())
	}
	if e.blobs != nil {
		errs = append(errs, e.blobs.Close())
	}
	return errors.Join(errs...)
}

// Healthy reports whether Postgres answers (within Options.PGTimeout or
// ctx's deadline), the files are open and no append's outcome is being
// resolved.
func (e *Engine) Healthy(ctx context.Context) error {
	if err := e.committer.Healthy(); err != nil {
		return err
	}
	ctx, cancel := pgbound.Context(ctx, e.opts.PGTimeout)
	defer cancel()
	if err := e.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// Degraded says what is wrong with a store that serves but lost
// something (damaged blob records); empty when nothing is.
func (e *Engine) Degraded() string {
	if n := len(e.blobs.Holes()); n > 0 {
		return fmt.Sprintf("%d damaged records in the blob pack: their blobs cannot be read; run `cardbox verify`", n)
	}
	return ""
}

// Stats describes the store's size and work.
type Stats struct {
	Contexts int
	// PackHoles is how many damaged records of the blob pack recovery
	// kept, and reads found since (see blobpack.Hole).
	PackHoles int
	Turns     int64
	LastTurn  uint64
	Blobs     int
	PackBytes int64 // blobs.pack
	LogBytes  int64 // turns.log
	Appends   int64 // appends committed by this process
	Groups    int64 // group commits by this process
	// The time groups with turns spent, in total since the process
	// started, making their files durable (the blob pack's and the turn
	// log's writes and fdatasyncs, in parallel), running their statement
	// (BEGIN and the group's rows, in parallel with the files; from the
	// same start), and committing (after both).
	FilesTime, StatementTime, CommitTime time.Duration
	// DamagedTurnsServed is how many turns Last and Before served
	// without their payload, which lies in a damaged record of the blob
	// pack (Turn.PayloadDamaged), since the process started.
	DamagedTurnsServed int64
	// Segments counts the segments of the blob pack and the turn log
	// by state (see docs/storage.md, Segments).
	Segments []SegmentStats
}

// Stats returns the store's current size.
func (e *Engine) Stats() Stats {
	bs, cs := e.blobs.Stats(), e.committer.Stats()
	return Stats{
		Contexts: e.index.Contexts.Len(), Turns: e.index.Turns.Count(), LastTurn: e.index.Turns.Visible(),
		Blobs: bs.Blobs, PackBytes: bs.PackBytes, LogBytes: e.turns.Size(), PackHoles: len(e.blobs.Holes()),
		Appends: cs.Appends, Groups: cs.Groups, FilesTime: cs.FilesTime, StatementTime: cs.StatementTime,
		CommitTime: cs.CommitTime, DamagedTurnsServed: e.damaged.Count(),
		Segments: e.sealer.Stats(e.blobs.Segments(), e.turns.Segments(), bs.PackBytes, e.turns.Size()),
	}
}

// DatabaseBytes returns the bytes Postgres uses for the turn store's
// tables and indexes.
func (e *Engine) DatabaseBytes(ctx context.Context) (int64, error) {
	ctx, cancel := pgbound.Context(ctx, e.opts.PGTimeout)
	defer cancel()
	return e.as(pgrole.Recovery, "").TurnStoreRelationBytes(ctx)
}

// Tenant resolves a tenant id.
func (e *Engine) Tenant(ctx context.Context, id string) (ident.Tenant, error) {
	return e.tenants.get(ctx, id)
}

// CreateContext makes a context whose head is baseTurnID (0 = empty).
func (e *Engine) CreateContext(ctx context.Context, t ident.Tenant, baseTurnID uint64, clientTag string) (Head, error) {
	if err := e.admit(t); err != nil {
		return Head{}, err
	}
	defer e.gate.Leave()
	var depth uint32
	if baseTurnID != 0 {
		m, ok := e.turnOf(t, baseTurnID)
		if !ok {
			return Head{}, fault.New(fault.NotFound, "base turn %d not found", baseTurnID)
		}
		depth = m.Depth
	}
	if err := e.checkQuota(ctx, t, ContextCharge); err != nil {
		return Head{}, err
	}
	row, err := e.as(pgrole.Tenant, t.ID).CreateContext(ctx, storedb.CreateContextParams{
		TenantID: t.ID, BaseTurnID: int64(baseTurnID), HeadDepth: int64(depth), ClientTag: clientTag,
	})
	if err != nil {
		return Head{}, fault.Wrap(fault.Unavailable, err, "create context")
	}
	h := Head{ContextID: uint64(row.ContextID), TurnID: baseTurnID, Depth: depth}
	at := row.CreatedAt.UnixMilli()
	e.index.Contexts.AddJump(t.No, h.ContextID, baseTurnID)
	e.index.Contexts.Put(h.ContextID, memindex.ContextState{Tenant: t.No, Head: baseTurnID, Depth: depth, Created: at, Updated: at})
	e.usage.Add(t.No, ContextCharge)
	return h, nil
}

// Head returns a context's head.
func (e *Engine) Head(_ context.Context, t ident.Tenant, contextID uint64) (Head, error) {
	s, err := e.contextOf(t, contextID)
	if err != nil {
		return Head{}, err
	}
	return Head{ContextID: contextID, TurnID: s.Head, Depth: s.Depth}, nil
}

// contextOf returns the tenant's context, or NOT_FOUND (see
// memindex.Index.Context).
func (e *Engine) contextOf(t ident.Tenant, id uint64) (memindex.ContextState, error) {
	return e.index.Context(t, id)
}

// turnOf returns the tenant's committed turn.
func (e *Engine) turnOf(t ident.Tenant, id uint64) (memindex.TurnMeta, bool) {
	return e.index.Turn(t, id)
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// BlobDir is where a data directory keeps the blob pack.
func BlobDir(dataDir string) string { return filepath.Join(dataDir, "blobs") }

// TurnLogPath is a data directory's turn log.
func TurnLogPath(dataDir string) string { return filepath.Join(dataDir, "turns", "turns.log") }

func blobDir(dir string) string     { return BlobDir(dir) }
func turnLogPath(dir string) string { return TurnLogPath(dir) }

// as returns the queries of a path's Postgres role; tenant names the
// tenant of a pgrole.Tenant scope. The statements of request paths end
// within Options.PGTimeout; those of recovery (start-up, and the metadata
// extraction's scans) and of the sweeper (background purges) are not
// bounded, since they may legitimately take longer.
func (e *Engine) as(role pgrole.Role, tenant string) *storedb.Queries {
	if role == pgrole.Recovery || role == pgrole.Sweeper {
		return storedb.New(pgrole.As(e.pool, role, tenant))
	}
	return storedb.New(pgrole.As(pgbound.Batcher{D: e.pool, Timeout: e.opts.PGTimeout}, role, tenant))
}
