package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/store/idemindex"
	"github.com/cardboxhq/cardbox/store/internal/deadspace"
	"github.com/cardboxhq/cardbox/store/internal/groupcommit"
	"github.com/cardboxhq/cardbox/store/internal/memindex"
	"github.com/cardboxhq/cardbox/store/syncfile"

	"github.com/google/uuid"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// storeIDFile ties a data directory to the database that holds its facts.
const storeIDFile = "STORE_ID"

// recover opens the files and rebuilds memory from them and Postgres:
//
//  0. end the sessions an earlier process left open (see SessionName), so
//     that nothing of it commits after this process has read the database;
//  1. match the directory's STORE_ID with the database's turn_stores row;
//  2. refuse a directory that lost blobs/ or turns/ while the database
//     holds committed turns;
//  3. of two generations of a segment (a compaction killed midway),
//     remove the one sealed_segments does not name; then
//     open the blob pack (its segments: the active one is recovered as
//     below, see docs/storage.md, Segments), never cutting below its committed end (a bad
//     record there is a hole, recorded and logged; only a torn tail past
//     it is cut; orphan blobs are harmless);
//  4. open the turn log, failing on damage below committed_end and cutting
//     everything from committed_end on (records of groups that never
//     committed), loading every record left into the turn table but those
//     of deleted tenants (loaded with the tenants, before);
//     then check the sealed segments of both against sealed_segments;
//  5. read again the records pack_holes names that the index still lists
//     (found damaged when read by an earlier process), and cross-check:
//     every committed payload and fs root is in the pack or in a hole,
//     else refuse to start (a payload missing while the pack has holes
//     whose blobs are unknown is remembered as lost, see lostBlobs);
//  6. load tenants, type refs, heads and recent idempotency keys, and check
//     that every head names a loaded turn; count what each tenant stores
//     (see package usage).
func (e *Engine) recover(ctx context.Context) error {
	if err := e.endEarlierSessions(ctx); err != nil {
		return err
	}
	state, err := e.loadState(ctx)
	if err != nil {
		return err
	}
	if err := checkDirs(e.opts.Dir, state); err != nil {
		return err
	}
	if err := e.settleGenerations(ctx); err != nil {
		return err
	}
	maxTurn, err := e.openFiles(ctx, state)
	if err != nil {
		return err
	}
	if err := e.checkSealed(ctx); err != nil {
		return err
	}
	if err := e.recheckRecordedHoles(ctx); err != nil {
		return err
	}
	if err := e.crossCheck(ctx, maxTurn); err != nil {
		return err
	}
	if err := e.loadTypes(ctx); err != nil {
		return err
	}
	if err := e.loadContexts(ctx); err != nil {
		return err
	}
	if err := e.loadUsage(ctx); err != nil {
		return err
	}
	idem, err := e.loadIdempotencyKeys(ctx)
	if err != nil {
		return err
	}
	next := max(uint64(state.NextTurnID), maxTurn+1)
	e.idem = idem
	e.committer = groupcommit.New(groupcommit.Config{
		Pool: e.pool, StoreID: e.storeID, Blobs: e.blobs, Turns: e.turns, Index: e.index, Idem: idem, Usage: e.usage,
		TenantID: e.tenants.idOf, NextTurn: next, MaxBatch: e.opts.MaxBatch, PGTimeout: e.opts.PGTimeout,
		OnAppend: e.opts.OnAppend, Now: e.opts.Now, Log: e.log, Dedup: &e.dedup, Hooks: e.opts.hooks,
	})
	e.log.Info("turn store open", "dir", e.opts.Dir, "turns", e.index.Turns.Count(), "last_turn_id", maxTurn, "contexts", e.index.Contexts.Len(),
		"blobs", e.blobs.Stats().Blobs, "recovery", e.blobs.Recovery())
	return nil
}

// openFiles opens the blob pack and the turn log side by side: each reads
// its whole file (the pack's record headers, the log's records) and
// neither needs the other, so a start with millions of turns takes about
// the longer of the two rather than their sum. Each repairs only what lies
// past its committed end, so one may do so while the other fails.
func (e *Engine) openFiles(ctx context.Context, state storedb.GetTurnLogStateRow) (maxTurn uint64, err error) {
	var blobErr error
	e.deaths = &deadspace.Deaths{}
	defer func() { e.deaths = nil }()
	var wg sync.WaitGroup
	wg.Go(func() { blobErr = e.openBlobs(ctx, state) })
	logErr := e.loadTenants(ctx)
	if logErr == nil {
		logErr = e.loadDeadTurns(ctx)
	}
	if logErr == nil {
		maxTurn, logErr = e.openTurnLog(state.CommittedEnd)
	}
	wg.Wait()
	if blobErr == nil && logErr == nil {
		deaths := e.deaths
		e.noteGoneOwners(func(owner uint32) time.Time {
			at, _ := deaths.TenantAt(owner)
			return at
		})
	}
	return maxTurn, errors.Join(blobErr, logErr)
}

// SessionPrefix starts the application_name of every session of a
// cardboxd process (see SessionName).
const SessionPrefix = "cardboxd/"

// SessionName returns an application_name for the Postgres sessions of
// one process: SessionPrefix and a random token. When a process names its
// sessions so, its recovery ends the sessions of every other process with
// the prefix, including those of a predecessor killed with transactions
// still open (their COMMIT could land after recovery read the database).
func SessionName() string {
	return SessionPrefix + rand.Text()
}

// endEarlierSessions ends the sessions of earlier processes on this
// database (a no-op unless this process's sessions have SessionPrefix).
func (e *Engine) endEarlierSessions(ctx context.Context) error {
	left, err := e.as(pgrole.Recovery, "").EndEarlierSessions(ctx, SessionPrefix)
	if err != nil {
		return fmt.Errorf("end the sessions of earlier processes: %w", err)
	}
	if left > 0 {
		return fmt.Errorf("%d Postgres sessions of an earlier cardboxd process (application_name %s...) did not end within 10 s: "+
			"stop that process first", left, SessionPrefix)
	}
	return nil
}

// loadState returns the database's turn log state for this directory,
// initialising both on first use and refusing a directory and a database
// that belong to different stores.
func (e *Engine) loadState(ctx context.Context) (storedb.GetTurnLogStateRow, error) {
	fileID, err := readStoreID(e.opts.Dir)
	if err != nil {
		return storedb.GetTurnLogStateRow{}, err
	}
	state, err := e.as(pgrole.Recovery, "").GetTurnLogState(ctx)
	switch {
	case err == nil && fileID == uuid.Nil:
		return state, fmt.Errorf("the database holds turn store %s but %s has no %s: is this the right data directory?",
			uuid.UUID(state.StoreID.Bytes), e.opts.Dir, storeIDFile)
	case err == nil && fileID != state.StoreID.Bytes:
		return state, fmt.Errorf("data directory %s belongs to turn store %s, the database to turn store %s",
			e.opts.Dir, fileID, uuid.UUID(state.StoreID.Bytes))
	case err == nil:
		e.storeID = state.StoreID
		return state, nil
	case !isNoRows(err):
		return state, fmt.Errorf("read turn log state: %w", err)
	}
	return e.initState(ctx, fileID)
}

// initState starts a new store, or finishes starting one whose STORE_ID was
// written before the database row.
func (e *Engine) initState(ctx context.Context, fileID uuid.UUID) (storedb.GetTurnLogStateRow, error) {
	if fi, err := os.Stat(turnLogPath(e.opts.Dir)); err == nil && fi.Size() > 0 {
		return storedb.GetTurnLogStateRow{}, fmt.Errorf("data directory %s holds turns but the database has no turn store: "+
			"is CARDBOX_DATABASE_URL the database this directory was used with?", e.opts.Dir)
	}
	if fileID == uuid.Nil {
		fileID = uuid.New()
		if err := writeStoreID(e.opts.Dir, fileID); err != nil {
			return storedb.GetTurnLogStateRow{}, err
		}
	}
	id := pgtype.UUID{Bytes: fileID, Valid: true}
	if err := e.as(pgrole.Recovery, "").InitTurnLogState(ctx, id); err != nil {
		return storedb.GetTurnLogStateRow{}, fmt.Errorf("init turn log state: %w", err)
	}
	e.storeID = id
	return storedb.GetTurnLogStateRow{StoreID: id, CommittedEnd: 0, NextTurnID: 1, PackEnd: -1}, nil
}

// ReadStoreID returns the id of the turn store a data directory belongs
// to (uuid.Nil when it has none yet).
func ReadStoreID(dataDir string) (uuid.UUID, error) { return readStoreID(dataDir) }

func readStoreID(dir string) (uuid.UUID, error) {
	b, err := os.ReadFile(filepath.Join(dir, storeIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return uuid.Nil, nil
	}
	if err != nil {
		return uuid.Nil, err
	}
	id, err := uuid.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		return uuid.Nil, fmt.Errorf("%s: %w", storeIDFile, err)
	}
	return id, nil
}

// writeStoreID writes the file durably: temp file, fsync, rename, fsync dir.
func writeStoreID(dir string, id uuid.UUID) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, storeIDFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(id.String() + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, storeIDFile)); err != nil {
		return err
	}
	return syncfile.Dir(dir)
}

// openTurnLog opens the log, keeping exactly the committed records, and
// loads them into the turn table. It returns the highest turn id.
func (e *Engine) openTurnLog(committedEnd int64) (uint64, error) {
	path := turnLogPath(e.opts.Dir)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	var maxTurn uint64
	var deleted int64
	var skipped deadspace.Ranges
	turns := map[uint32]int64{} // by tenant, for the usage
	// The turn each context's head was when the record was appended: the
	// context's previous turn (every append moves its head), or its base.
	heads := map[uint64]uint64{}
	load := func(off int64, r turnlog.Record) error {
		maxTurn = max(maxTurn, r.TurnID) // a deleted tenant's ids are not handed out again
		if e.gate.Gone(r.Tenant) || e.index.Dead.Has(r.TurnID) {
			deleted++
			skipped.Note(off, turnlog.RecordSize, e.deaths.At(r.TurnID, r.Tenant))
			return nil
		}
		e.index.Turns.Set(r.TurnID, memindex.TurnMeta{
			Parent: r.ParentTurnID, Hash: r.PayloadHash, Depth: r.Depth, Tenant: r.Tenant,
			TypeRef: r.TypeRef, TypeVersion: r.TypeVersion, Encoding: r.Encoding,
			Compression: r.Compression, UncompressedLen: r.UncompressedLen,
		})
		maxTurn = max(maxTurn, r.TurnID)
		turns[r.Tenant]++
		if r.ParentTurnID != heads[r.ContextID] {
			e.index.Contexts.AddJump(r.Tenant, r.ContextID, r.ParentTurnID)
		}
		heads[r.ContextID] = r.TurnID
		return nil
	}
	log, err := turnlog.Open(path, turnlog.Options{
		MinValidSize: committedEnd, TruncateAt: committedEnd, Reserve: e.opts.fileReserve(),
		SegmentSize: e.opts.SegmentSize, OnRollover: e.sealer.Wake,
	}, load)
	if err != nil {
		return 0, err
	}
	e.turns = log
	var starts []int64
	for _, seg := range log.Segments() {
		starts = append(starts, seg.ID.Start)
	}
	skipped.Spread(e.deadTurns, starts)
	if log.Size() < committedEnd {
		return 0, fmt.Errorf("turn log %s is %d bytes but %d bytes were committed: committed turns are missing "+
			"(restore the data directory from a backup)", path, log.Size(), committedEnd)
	}
	e.index.Turns.Publish(maxTurn)
	if deleted > 0 {
		e.log.Info("turn log: records of deleted tenants and dead turns skipped; their bytes stay in the files until a compaction",
			"records", deleted)
	}
	for tenant, n := range turns {
		e.usage.Add(tenant, n*TurnCharge)
	}
	return maxTurn, nil
}

// loadTenants resolves every live tenant and closes the gates of the
// deleted ones, whose records the turn log's load then skips.
func (e *Engine) loadTenants(ctx context.Context) error {
	rows, err := e.as(pgrole.Recovery, "").ListTenants(ctx)
	if err != nil {
		return fmt.Errorf("load tenants: %w", err)
	}
	var deleted []uint32
	for _, r := range rows {
		if r.Deleted {
			deleted = append(deleted, uint32(r.TenantNo))
			e.deaths.Tenant(uint32(r.TenantNo), r.DeletedAt.Time)
			continue
		}
		e.tenants.add(ident.Tenant{ID: r.TenantID, No: uint32(r.TenantNo)})
	}
	e.gate.CloseAll(deleted)
	return nil
}

func (e *Engine) loadTypes(ctx context.Context) error {
	rows, err := e.as(pgrole.Recovery, "").ListTurnTypes(ctx)
	if err != nil {
		return fmt.Errorf("load turn types: %w", err)
	}
	for _, r := range rows {
		e.index.Types.Add(uint32(r.TenantNo), uint32(r.TypeRef), r.TypeID)
	}
	return nil
}

// loadContexts loads every head and checks it names a committed turn of
// the same tenant.
func (e *Engine) loadContexts(ctx context.Context) error {
	rows, err := e.as(pgrole.Recovery, "").ListContexts(ctx)
	if err != nil {
		return fmt.Errorf("load contexts: %w", err)
	}
	for _, r := range rows {
		s := memindex.ContextState{
			Tenant: uint32(r.TenantNo), Head: uint64(r.HeadTurnID), Depth: uint32(r.HeadDepth),
			Created: r.CreatedAt.UnixMilli(), Updated: r.UpdatedAt.UnixMilli(),
		}
		if s.Head != 0 {
			m, ok := e.index.Turns.Get(s.Head)
			if !ok || m.Tenant != s.Tenant || m.Depth != s.Depth {
				return fmt.Errorf("context %d: head turn %d is not in the turn log", r.ContextID, s.Head)
			}
		}
		e.index.Contexts.AddJump(s.Tenant, uint64(r.ContextID), uint64(r.BaseTurnID))
		e.index.Contexts.Put(uint64(r.ContextID), s)
		e.usage.Add(s.Tenant, ContextCharge)
	}
	return nil
}

// loadIdempotencyKeys loads the newest keys of the window, at most the
// in-memory index's cap, in a query that returns no more than that and is
// read row by row: at start-up as at run time, the older keys of the
// window stay in Postgres, which answers for them (Engine.replayFromDB).
// Those older keys go into the filter of forgotten keys, so that only
// their retries ask Postgres, not every new key for a day.
func (e *Engine) loadIdempotencyKeys(ctx context.Context) (*idemindex.Table, error) {
	t := idemindex.New(e.opts.MaxIdempotencyKeys)
	since := e.now().Add(-IdempotencyWindow)
	q := e.as(pgrole.Recovery, "")
	err := q.ForEachNewestIdempotencyKey(ctx, storedb.ListNewestIdempotencyKeysParams{
		Since: since, MaxKeys: int32(t.Cap()),
	}, func(r *storedb.ListNewestIdempotencyKeysRow) error {
		t.LoadOlder(idemindex.NewKey(uint32(r.TenantNo), uint64(r.ContextID), r.IdempotencyKey), idemindex.Entry{
			Turn: uint64(r.TurnID), At: r.CreatedAt,
			Parent: uint64(r.RequestedParentTurnID.Int64), ParentKnown: r.RequestedParentTurnID.Valid,
		})
		return nil
	})
	if err != nil {
		return t, fmt.Errorf("load idempotency keys: %w", err)
	}
	oldest, held := t.OldestHeld()
	if !held || t.LoadedRows() < t.Cap() {
		t.Loaded(true) // the window held no more
		return t, nil
	}
	// Up to the oldest held, included: keys of the same instant may have
	// been left out by the cap.
	err = q.ForEachOlderIdempotencyKey(ctx, storedb.ListOlderIdempotencyKeysParams{Since: since, Until: oldest},
		func(r *storedb.ListOlderIdempotencyKeysRow) error {
			t.LoadForgotten(idemindex.NewKey(uint32(r.TenantNo), uint64(r.ContextID), r.IdempotencyKey), r.CreatedAt)
			return nil
		})
	if err != nil {
		return t, fmt.Errorf("load the older idempotency keys: %w", err)
	}
	t.Loaded(true)
	return t, nil
}
