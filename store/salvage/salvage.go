// Package salvage checks and repairs a stopped store's data directory
// against its Postgres database: Verify re-reads every blob and turn
// record and cross-checks the rows; Recover rebuilds what Postgres can
// rebuild (the turn log, the pack's index) and says what it cannot (blobs
// in damaged records). Both run offline, with the data directory's lock
// held by the caller (see internal/datadir).
package salvage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// Report is what Verify or Recover found and did.
type Report struct {
	Blobs, Records, Turns int // good blobs, good turn records, turn rows
	// Sealed counts the sealed segments found as they were sealed.
	Sealed int
	// DeletedRecords are good turn records of deleted tenants: known,
	// never served, left for a compaction; not counted in Records.
	DeletedRecords int
	// DeadRecords are good turn records of turns that died with deleted
	// contexts (dead_turns), of DeletedContexts contexts: known, never
	// served, left for a compaction; not counted in Records.
	DeadRecords, DeletedContexts int
	PackDefects                  []blobpack.Defect
	LogDefects                   []turnlog.Defect
	// Problems are the cross-check's findings, at most maxListed of each
	// kind; Counts has every kind's total.
	Problems []string
	Counts   map[string]int
	// Actions are what Recover did; StartErr is why the store does not
	// start after it (nil: it starts).
	Actions  []string
	StartErr error
}

// OK reports whether nothing is wrong.
func (r *Report) OK() bool {
	return len(r.PackDefects) == 0 && len(r.LogDefects) == 0 && len(r.Counts) == 0
}

// maxListed bounds the problems of one kind the report lists.
const maxListed = 10

func (r *Report) problem(kind, format string, args ...any) {
	if r.Counts == nil {
		r.Counts = map[string]int{}
	}
	if r.Counts[kind]++; r.Counts[kind] <= maxListed {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Print writes the report for people.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "blob pack: %d good blobs, %d damaged regions\n", r.Blobs, len(r.PackDefects))
	for _, d := range r.PackDefects {
		fmt.Fprintf(w, "  damaged bytes %d..%d: %s\n", d.Offset, d.End, d.Reason)
	}
	fmt.Fprintf(w, "turn log: %d good records, %d damaged", r.Records, len(r.LogDefects))
	if r.DeletedRecords > 0 {
		fmt.Fprintf(w, ", and %d of deleted tenants (unreadable, kept until a compaction)", r.DeletedRecords)
	}
	if r.DeadRecords > 0 || r.DeletedContexts > 0 {
		fmt.Fprintf(w, ", and %d of dead turns of %d deleted contexts (unreadable, kept until a compaction)", r.DeadRecords, r.DeletedContexts)
	}
	fmt.Fprintln(w)
	for _, d := range r.LogDefects {
		fmt.Fprintf(w, "  record at %d: %s\n", d.Offset, d.Reason)
	}
	fmt.Fprintf(w, "postgres: %d turns, %d sealed segments intact\n", r.Turns, r.Sealed)
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
	for kind, n := range r.Counts {
		if n > maxListed {
			fmt.Fprintf(w, "  ... %d %s in all\n", n, kind)
		}
	}
	for _, a := range r.Actions {
		fmt.Fprintf(w, "done: %s\n", a)
	}
	if r.Actions != nil && r.StartErr == nil {
		fmt.Fprintln(w, "the store starts")
	} else if r.StartErr != nil {
		fmt.Fprintf(w, "the store does NOT start: %v\n", r.StartErr)
	}
}

// files is what the data directory holds, as read by verify.
type files struct {
	blobs   map[ident.Hash]struct{}
	records map[uint64][32]byte // turn id -> payload hash
	logEnd  int64
	maxTurn uint64
}

// Verify re-reads every blob of the pack (CRC, decompression, BLAKE3) and
// every turn record (CRC), and cross-checks them with Postgres: every turn
// row has its record and its payload, every head and fs root exists, the
// log reaches its committed end. Progress goes to progress.
func Verify(ctx context.Context, dataDir string, pool *pgxpool.Pool, progress io.Writer) (*Report, error) {
	q := storedb.New(pgrole.As(pool, pgrole.Recovery, ""))
	if err := sameStore(ctx, dataDir, q); err != nil {
		return nil, err
	}
	deleted, err := deletedTenants(ctx, q)
	if err != nil {
		return nil, err
	}
	r := &Report{}
	dead, err := deadTurns(ctx, q, r)
	if err != nil {
		return nil, err
	}
	f, err := readFiles(dataDir, deleted, dead, r, progress)
	if err != nil {
		return nil, err
	}
	if err := checkSealed(ctx, q, dataDir, r); err != nil {
		return nil, err
	}
	return r, crossCheck(ctx, q, f, r, progress)
}

// checkSealed reads every sealed segment again: its file must be there,
// as long as it was sealed, and hash to the BLAKE3 it was sealed with.
func checkSealed(ctx context.Context, q *storedb.Queries, dataDir string, r *Report) error {
	state, err := q.GetTurnLogState(ctx)
	if err != nil {
		return fmt.Errorf("read the turn store's state: %w", err)
	}
	rows, err := q.ListSealedSegments(ctx, state.StoreID)
	if err != nil {
		return fmt.Errorf("list sealed segments: %w", err)
	}
	layouts := map[string]segment.Layout{"blobs": blobpack.Layout(store.BlobDir(dataDir)), "turns": turnlog.Layout(store.TurnLogPath(dataDir))}
	for _, row := range rows {
		path := layouts[row.Stream].Path(segment.ID{Start: row.StartOffset, Gen: uint32(row.Generation)})
		sum, n, err := segment.Sum(ctx, path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			r.problem("sealed segments", "sealed segment %s is missing", path)
		case err != nil:
			return err
		case n != row.Length:
			r.problem("sealed segments", "sealed segment %s has %d bytes, sealed with %d", path, n, row.Length)
		case !bytes.Equal(sum[:], row.Blake3):
			r.problem("sealed segments", "sealed segment %s does not hash to the BLAKE3 it was sealed with (%x)", path, row.Blake3)
		default:
			r.Sealed++
		}
	}
	return nil
}

// deletedTenants returns the numbers of the deleted tenants, whose turn
// records are known and not damage: their rows are gone on purpose.
func deletedTenants(ctx context.Context, q *storedb.Queries) (map[uint32]bool, error) {
	rows, err := q.ListDeletedTenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("list deleted tenants: %w", err)
	}
	out := make(map[uint32]bool, len(rows))
	for _, r := range rows {
		out[uint32(r.TenantNo)] = true
	}
	return out, nil
}

// sameStore refuses a data directory and a database that belong to
// different turn stores: rebuilding one from the other would destroy it.
func sameStore(ctx context.Context, dataDir string, q *storedb.Queries) error {
	fileID, err := store.ReadStoreID(dataDir)
	if err != nil {
		return err
	}
	state, err := q.GetTurnLogState(ctx)
	if err != nil {
		return fmt.Errorf("the database holds no turn store (%w): is this the database of %s?", err, dataDir)
	}
	if fileID != state.StoreID.Bytes {
		return fmt.Errorf("%s belongs to turn store %s, the database to %s: refusing to compare or rebuild them",
			dataDir, fileID, uuid.UUID(state.StoreID.Bytes))
	}
	return nil
}

// deadTurns returns the turns that died with deleted contexts, whose turn
// records are known and not damage: their rows are gone on purpose. It
// counts the deleted contexts in r.
func deadTurns(ctx context.Context, q *storedb.Queries, r *Report) (map[uint64]bool, error) {
	rows, err := q.ListDeadTurnsDied(ctx)
	if err != nil {
		return nil, fmt.Errorf("list dead turns: %w", err)
	}
	n, err := q.CountDeletedContexts(ctx)
	if err != nil {
		return nil, fmt.Errorf("count deleted contexts: %w", err)
	}
	r.DeletedContexts = int(n)
	dead := make(map[uint64]bool, len(rows))
	for _, row := range rows {
		dead[uint64(row.TurnID)] = true
	}
	return dead, nil
}

func readFiles(dataDir string, deleted map[uint32]bool, dead map[uint64]bool, r *Report, progress io.Writer) (*files, error) {
	f := &files{blobs: map[ident.Hash]struct{}{}, records: map[uint64][32]byte{}}
	step := newProgress(progress, "blob pack")
	defects, err := blobpack.Verify(store.BlobDir(dataDir), func(e blobpack.Entry) {
		f.blobs[ident.Hash(e.Hash)] = struct{}{}
	}, step)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if errors.Is(err, os.ErrNotExist) {
		r.problem("missing files", "%s is missing", store.BlobDir(dataDir))
	}
	r.Blobs, r.PackDefects = len(f.blobs), defects
	end, logDefects, err := turnlog.Scan(store.TurnLogPath(dataDir), func(_ int64, rec turnlog.Record) {
		f.maxTurn = max(f.maxTurn, rec.TurnID)
		if deleted[rec.Tenant] {
			r.DeletedRecords++
			return
		}
		if dead[rec.TurnID] {
			r.DeadRecords++
			return
		}
		f.records[rec.TurnID] = rec.PayloadHash
	})
	if errors.Is(err, os.ErrNotExist) {
		r.problem("missing files", "%s is missing", store.TurnLogPath(dataDir))
	} else if err != nil {
		return nil, err
	}
	f.logEnd, r.Records, r.LogDefects = end, len(f.records), logDefects
	return f, nil
}

// pageSize is how many turn rows one query reads.
const pageSize = 10_000

func crossCheck(ctx context.Context, q *storedb.Queries, f *files, r *Report, progress io.Writer) error {
	state, err := q.GetTurnLogState(ctx)
	if err != nil {
		return fmt.Errorf("read the turn store's state: %w", err)
	}
	if f.logEnd < state.CommittedEnd {
		r.problem("short turn log", "the turn log ends at %d but %d bytes were committed", f.logEnd, state.CommittedEnd)
	}
	step := newProgress(progress, "postgres turns")
	err = eachTurn(ctx, q, func(row storedb.ListTurnRecordsAfterRow) {
		r.Turns++
		id := uint64(row.TurnID)
		hash, ok := f.records[id]
		switch {
		case !ok:
			r.problem("turns without a record", "turn %d has no turn log record", id)
		case string(hash[:]) != string(row.PayloadHash):
			r.problem("records that disagree", "turn %d's record names payload %x, Postgres %x", id, hash, row.PayloadHash)
		}
		if _, ok := f.blobs[ident.Hash(row.PayloadHash)]; !ok {
			r.problem("payloads missing", "payload %x of turn %d is not a good blob of the pack", row.PayloadHash, id)
		}
		if r.Turns%pageSize == 0 {
			step(int64(r.Turns), 0)
		}
	})
	if err != nil {
		return err
	}
	return checkHeadsAndRoots(ctx, q, f, r)
}

func checkHeadsAndRoots(ctx context.Context, q *storedb.Queries, f *files, r *Report) error {
	heads, err := q.ListContexts(ctx)
	if err != nil {
		return fmt.Errorf("list contexts: %w", err)
	}
	for _, h := range heads {
		if _, ok := f.records[uint64(h.HeadTurnID)]; h.HeadTurnID != 0 && !ok {
			r.problem("heads without a record", "context %d's head, turn %d, has no turn log record", h.ContextID, h.HeadTurnID)
		}
	}
	roots, err := q.ListFSRoots(ctx)
	if err != nil {
		return fmt.Errorf("list fs roots: %w", err)
	}
	for _, root := range roots {
		if _, ok := f.blobs[ident.Hash(root)]; !ok {
			r.problem("fs roots missing", "fs root %x is not a good blob of the pack", root)
		}
	}
	return nil
}

// eachTurn calls fn with every turn row, in id order.
func eachTurn(ctx context.Context, q *storedb.Queries, fn func(storedb.ListTurnRecordsAfterRow)) error {
	var after int64
	for {
		rows, err := q.ListTurnRecordsAfter(ctx, storedb.ListTurnRecordsAfterParams{After: after, PageSize: pageSize})
		if err != nil {
			return fmt.Errorf("read turns after %d: %w", after, err)
		}
		for _, row := range rows {
			fn(row)
		}
		if len(rows) < pageSize {
			return nil
		}
		after = rows[len(rows)-1].TurnID
	}
}

// newProgress returns a progress callback that reports on w.
func newProgress(w io.Writer, what string) func(done, total int64) {
	if w == nil {
		return nil
	}
	lastPct := int64(-1)
	return func(done, total int64) {
		if total <= 0 {
			fmt.Fprintf(w, "\r%s: %d", what, done)
			return
		}
		if pct := done * 100 / total; pct != lastPct && pct%5 == 0 {
			lastPct = pct
			fmt.Fprintf(w, "\r%s: %d%%", what, pct)
			if pct == 100 {
				fmt.Fprintln(w)
			}
		}
	}
}
