package salvage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// Recover repairs what Postgres and the pack can repair, then opens the
// store to prove it starts:
//
//   - the turn log, when it is missing, has damaged records, or disagrees
//     with the turn rows, is rebuilt from the rows (the old file is kept
//     beside it), and the commit row says where it ends;
//   - the pack's index is rebuilt from the pack;
//   - blobs in damaged records of the pack are reported: only a backup, or
//     a client storing them again, brings them back.
//
// It returns the report of a Verify run after the repairs.
func Recover(ctx context.Context, dataDir string, pool *pgxpool.Pool, progress io.Writer) (*Report, error) {
	before, err := Verify(ctx, dataDir, pool, progress)
	if err != nil {
		return nil, err
	}
	var actions []string
	var a string
	if needsLogRebuild(before) {
		if a, err = rebuildLog(ctx, dataDir, storedb.New(pgrole.As(pool, pgrole.Recovery, ""))); err != nil {
			return nil, err
		}
		actions = append(actions, a)
	}
	a, err = rebuildIndex(ctx, dataDir, storedb.New(pgrole.As(pool, pgrole.Recovery, "")))
	if err != nil {
		return nil, err
	}
	actions = append(actions, a)
	after, err := Verify(ctx, dataDir, pool, progress)
	if err != nil {
		return nil, err
	}
	after.Actions = actions
	after.StartErr = startable(ctx, dataDir, pool)
	return after, nil
}

// needsLogRebuild reports whether the turn log is damaged or disagrees
// with Postgres.
func needsLogRebuild(r *Report) bool {
	if len(r.LogDefects) > 0 {
		return true
	}
	for _, kind := range []string{"short turn log", "turns without a record", "records that disagree", "heads without a record"} {
		if r.Counts[kind] > 0 {
			return true
		}
	}
	return r.Records != r.Turns
}

// rebuildLog writes the turn log anew from the turn rows, in id order (the
// order they committed in), and resets the commit row to its end.
func rebuildLog(ctx context.Context, dataDir string, q *storedb.Queries) (string, error) {
	state, err := q.GetTurnLogState(ctx)
	if err != nil {
		return "", fmt.Errorf("read the turn store's state: %w", err)
	}
	// The old log's sealed segments are forgotten before its files are
	// moved aside: a crash in between leaves segments that are merely
	// unsealed, which a start seals again.
	err = q.ForgetSealedSegments(ctx, storedb.ForgetSealedSegmentsParams{StoreID: state.StoreID, Stream: "turns"})
	if err != nil {
		return "", fmt.Errorf("forget the old turn log's sealed segments: %w", err)
	}
	next, last := pageTurns(ctx, q)
	size, backup, err := turnlog.Rebuild(store.TurnLogPath(dataDir), next)
	if err != nil {
		return "", err
	}
	params := storedb.ResetTurnLogCommitsParams{
		StoreID: state.StoreID, CommittedEnd: size, NextTurnID: max(state.NextTurnID, last()+1),
		PackEnd: pgtype.Int8{Int64: state.PackEnd, Valid: state.PackEnd >= 0},
	}
	if err := q.ResetTurnLogCommits(ctx, params); err != nil {
		return "", fmt.Errorf("record the rebuilt turn log's end: %w", err)
	}
	msg := fmt.Sprintf("rebuilt the turn log from Postgres: %d records", size/turnlog.RecordSize)
	if backup != "" {
		msg += "; the old log is kept as " + backup
	}
	return msg, nil
}

// pageTurns returns an iterator over the turn rows as turn log records,
// and the highest turn id it has returned.
func pageTurns(ctx context.Context, q *storedb.Queries) (next func() (turnlog.Record, bool, error), last func() int64) {
	var page []storedb.ListTurnRecordsAfterRow
	var after int64
	done := false
	next = func() (turnlog.Record, bool, error) {
		if len(page) == 0 && !done {
			rows, err := q.ListTurnRecordsAfter(ctx, storedb.ListTurnRecordsAfterParams{After: after, PageSize: pageSize})
			if err != nil {
				return turnlog.Record{}, false, fmt.Errorf("read turns after %d: %w", after, err)
			}
			page, done = rows, len(rows) < pageSize
			if len(rows) > 0 {
				after = rows[len(rows)-1].TurnID
			}
		}
		if len(page) == 0 {
			return turnlog.Record{}, false, nil
		}
		row := page[0]
		page = page[1:]
		return recordOf(row), true, nil
	}
	return next, func() int64 { return after }
}

func recordOf(row storedb.ListTurnRecordsAfterRow) turnlog.Record {
	r := turnlog.Record{
		TurnID: uint64(row.TurnID), ParentTurnID: uint64(row.ParentTurnID), ContextID: uint64(row.ContextID),
		Depth: uint32(row.Depth), Tenant: uint32(row.TenantNo), TypeRef: uint32(row.TypeRef),
		TypeVersion: uint32(row.TypeVersion), Encoding: uint32(row.Encoding), Compression: uint32(row.Compression),
		UncompressedLen: uint32(row.UncompressedLen), CreatedAtUnixMs: uint64(row.CreatedAt.UnixMilli()),
	}
	if row.HasFsRoot {
		r.Flags |= turnlog.FlagFSRoot
	}
	copy(r.PayloadHash[:], row.PayloadHash)
	return r
}

// rebuildIndex sets blobs.idx aside and opens the pack, which rebuilds it
// by scanning the pack, never cutting below its committed end.
func rebuildIndex(ctx context.Context, dataDir string, q *storedb.Queries) (string, error) {
	state, err := q.GetTurnLogState(ctx)
	if err != nil {
		return "", fmt.Errorf("read the turn store's state: %w", err)
	}
	dir := store.BlobDir(dataDir)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s is missing: only a backup can restore the blobs", dir)
	}
	idx := filepath.Join(dir, blobpack.IndexFile)
	if err := os.Rename(idx, idx+".old"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("set the pack's index aside: %w", err)
	}
	p, err := blobpack.Open(dir, blobpack.Options{MinValidSize: max(state.PackEnd, 0)})
	if err != nil {
		return "", fmt.Errorf("rebuild the pack's index: %w", err)
	}
	n, holes := p.Stats().Blobs, p.Holes()
	if err := p.Close(); err != nil {
		return "", err
	}
	os.Remove(idx + ".old")
	msg := fmt.Sprintf("rebuilt %s: %d blobs", blobpack.IndexFile, n)
	if len(holes) > 0 {
		msg += fmt.Sprintf("; %d damaged regions of the pack cannot be read (restore their blobs from a backup, or have clients store them again)", len(holes))
	}
	return msg, nil
}

// startable opens and closes the store, as cardboxd would.
func startable(ctx context.Context, dataDir string, pool *pgxpool.Pool) error {
	e, err := store.Open(ctx, store.Options{Dir: dataDir, Pool: pool})
	if err != nil {
		return err
	}
	return e.Close()
}
