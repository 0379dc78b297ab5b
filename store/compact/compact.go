// Package compact rewrites a sealed segment of the turn log without the
// records of dead turns and of deleted tenants (Turns), or of the blob
// pack without the records of blobs no tenant claims any more (Pack), and
// swaps the rewrite in.
// The steps below are the same for both; what differs is how a stream's
// records are read and which are dead.
//
// # Layout of a rewrite
//
// A rewrite keeps its segment's range of logical offsets, so that no
// other segment, no committed end and no record outside it moves: the
// live records are copied, in order, to the start of the range as the
// segment's next generation, and the rest of the range becomes a gap
// that holds nothing (package segment). The live records' offsets change
// inside the range, but nothing in Postgres names a record by its
// offset: the turn table is keyed by turn id and the pack's index by
// hash, both rebuilt from the files at every start, and the only offsets
// Postgres records (the committed ends) lie at or past the end of every
// sealed segment (the pack's holes in the range go in the swap's
// transaction). So the swap is one UPDATE of the segment's
// sealed_segments row, and recovery reads a rewritten segment as any
// other. The running pack points its index, and rewrites blobs.idx, at
// the new offsets when it installs the rewrite (blobpack.Pack.Install).
//
// # Steps and crash assumptions
//
//  1. Read the sealed segment, checking every record's CRC and the
//     file's length and BLAKE3 against its seal: a compaction never
//     seals damage into a new generation.
//  2. Ask the store which of its records are dead: turns listed in
//     dead_turns (their rows are gone) or of a deleted tenant; blobs whose first storer is a
//     deleted tenant and which no tenant claims, less those a put or an
//     append deduplicated against since the compaction began
//     (blobpack.Pack.Condemn); the store first waits for the puts and
//     appends whose lookups came before to commit their claims or fail.
//     None: nothing is rewritten.
//  3. Write the live records to the next generation's file, created
//     beside the old one, handing them to the disk a megabyte at a time
//     as they are written, so that the fsync of 4 is no large flush that
//     stalls the appends' fdatasyncs behind it (Step Written).
//  4. fsync the file and the directory (Step Synced).
//  5. Swap, in one Postgres transaction, the segment's sealed_segments
//     row to the rewrite: generation, length, BLAKE3 (Step Swapped);
//     for the pack, the same transaction asks again whether the blobs
//     dropped are dead and forgets the range's pack_holes.
//  6. Install the rewrite in the open log; the old file is closed (Step
//     Installed).
//  7. Remove the old file and fsync the directory.
//
// A crash before 5 commits leaves the old generation named by Postgres
// and a rewrite, whole or torn, beside it: the next start removes the
// rewrite. A crash after it leaves the rewrite named, fsynced in 4, and
// the old file beside it: the next start removes the old file. Either
// way every live record is in the generation Postgres names, and no
// manual step is needed. A compaction whose swap failed in a running
// process (its outcome perhaps unknown) leaves both files too; the next
// compaction of the segment asks Postgres which generation it names and
// finishes the swap or removes the rewrite first.
package compact

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/syncfile"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// Sealed is a segment as sealed_segments records it.
type Sealed struct {
	ID     segment.ID
	Length int64
	BLAKE3 [32]byte
}

// Store is what a compaction needs of the turn store. Its methods are
// called by one compaction at a time.
type Store interface {
	// Sealed returns the turn log's sealed segment starting at start, as
	// Postgres records it now.
	Sealed(ctx context.Context, start int64) (Sealed, error)
	// Dead returns which of the turns are dead: listed in dead_turns,
	// their rows removed, so that no fact names them any more.
	Dead(ctx context.Context, turnIDs []uint64) (map[uint64]bool, error)
	// Gone reports whether the tenant numbered tenant is deleted: its
	// records are dead whatever their turns.
	Gone(tenant uint32) bool
	// Swap makes rewrite the sealed segment of its range in place of
	// old, in one Postgres transaction, and fails if Postgres names
	// another generation than old.
	Swap(ctx context.Context, old segment.ID, rewrite Sealed) error
	// Install makes the open log read the range from the rewrite, which
	// Postgres names, and returns the generation it replaced, whose file
	// is closed and left for the compaction to remove.
	Install(ctx context.Context, rewrite segment.ID) (segment.Info, error)
}

// Step is a point between the steps of a compaction, at which Options.Hook
// is called.
type Step int

// The steps a hook is called after.
const (
	// Written: the rewrite's bytes are written, not fsynced.
	Written Step = iota + 1
	// Synced: the rewrite and its directory are fsynced; Postgres still
	// names the old generation.
	Synced
	// Swapped: Postgres names the rewrite; the log still reads the old
	// generation.
	Swapped
	// Installed: the log reads the rewrite; the old file is on disk.
	Installed
)

func (s Step) String() string {
	switch s {
	case Written:
		return "written"
	case Synced:
		return "synced"
	case Swapped:
		return "swapped"
	case Installed:
		return "installed"
	}
	return fmt.Sprintf("Step(%d)", int(s))
}

// Options configure a compaction.
type Options struct {
	// Hook, if set, is called after each Step. An error from it stops the
	// compaction there and is returned, with nothing undone: what a crash
	// at that point leaves (crash tests).
	Hook func(Step) error
	// Limiter, if set, bounds the compaction's I/O, whatever the stream:
	// every byte read from the old generation and written to the rewrite
	// takes a token of it first (cardboxd --compaction-rate).
	Limiter Limiter
}

// Limiter is a token bucket of bytes: golang.org/x/time/rate.Limiter.
type Limiter interface {
	// WaitN blocks until n tokens are there, or ctx ends.
	WaitN(ctx context.Context, n int) error
	// Burst is the most tokens one WaitN may ask for.
	Burst() int
}

// LimitReader returns r reading through lim (a nil lim: r itself): each
// Read reads at most a burst, and takes its bytes' tokens before it
// returns.
func LimitReader(ctx context.Context, lim Limiter, r io.Reader) io.Reader {
	if lim == nil {
		return r
	}
	return &limitedReader{ctx: ctx, lim: lim, r: r}
}

// LimitWriter returns w writing through lim (a nil lim: w itself): each
// Write takes its bytes' tokens, a burst at a time, before it writes.
func LimitWriter(ctx context.Context, lim Limiter, w io.Writer) io.Writer {
	if lim == nil {
		return w
	}
	return &limitedWriter{ctx: ctx, lim: lim, w: w}
}

type limitedReader struct {
	ctx context.Context
	lim Limiter
	r   io.Reader
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if b := max(l.lim.Burst(), 1); len(p) > b {
		p = p[:b]
	}
	n, err := l.r.Read(p)
	if n > 0 {
		// Taken once read, so that the bytes counted are those read.
		if werr := l.lim.WaitN(l.ctx, n); werr != nil {
			return n, fmt.Errorf("compaction rate limit: %w", werr)
		}
	}
	return n, err
}

type limitedWriter struct {
	ctx context.Context
	lim Limiter
	w   io.Writer
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		n := min(len(p), max(l.lim.Burst(), 1))
		if err := l.lim.WaitN(l.ctx, n); err != nil {
			return written, fmt.Errorf("compaction rate limit: %w", err)
		}
		m, err := l.w.Write(p[:n])
		written += m
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// Result describes a compaction of one segment.
type Result struct {
	Old, New segment.ID // New is Old when nothing was rewritten
	// Records and Dropped count the old generation's records and the
	// dead ones left out of the rewrite.
	Records, Dropped int
	// Before and After are the segment's bytes in the old generation and
	// in the one Postgres names now.
	Before, After int64
}

// Reclaimed is the bytes the compaction gave back.
func (r Result) Reclaimed() int64 { return r.Before - r.After }

// Turns compacts seg, a sealed segment of the turn log whose segments
// layout names, as the package documentation says.
func Turns(ctx context.Context, st Store, layout segment.Layout, seg segment.Info, opts Options) (Result, error) {
	return run[turnRecord, uint64](ctx, turnStore{st}, turnRecords, layout, seg, opts)
}

// turnRecord is what a turn's compaction knows of a record of the turn
// log: its turn and its tenant.
type turnRecord struct {
	turn   uint64
	tenant uint32
}

// turnStore is a Store as run sees it: a record is dead when its turn is
// or its tenant is deleted.
type turnStore struct{ Store }

func (s turnStore) Dead(ctx context.Context, recs []turnRecord) (map[uint64]bool, error) {
	ids := make([]uint64, len(recs))
	for i, r := range recs {
		ids[i] = r.turn
	}
	dead, err := s.Store.Dead(ctx, ids)
	if err != nil {
		return nil, err
	}
	gone := map[uint32]bool{}
	for _, r := range recs {
		g, seen := gone[r.tenant]
		if !seen {
			g = s.Gone(r.tenant)
			gone[r.tenant] = g
		}
		if g {
			if dead == nil {
				dead = map[uint64]bool{}
			}
			dead[r.turn] = true
		}
	}
	return dead, nil
}

// segmentStore is what a compaction needs of the store whose stream it
// compacts: Store for the turn log, PackStore for the blob pack. R
// describes a record to Dead, which answers by key K.
type segmentStore[R any, K comparable] interface {
	Sealed(ctx context.Context, start int64) (Sealed, error)
	Dead(ctx context.Context, records []R) (map[K]bool, error)
	Swap(ctx context.Context, old segment.ID, rewrite Sealed) error
	Install(ctx context.Context, rewrite segment.ID) (segment.Info, error)
}

// recordKind reads the records of one stream's segment files.
type recordKind[R any, K comparable] struct {
	// records calls fn with each record of the segment file at path,
	// whose first byte is at offset start, in order, after checking it,
	// and returns the file's BLAKE3 and length; a bad or partial record
	// is an error. It reads the file through lim (LimitReader).
	records func(ctx context.Context, path string, start int64, lim Limiter, fn func(raw []byte, r R) error) (sum [32]byte, length int64, err error)
	// key is what Dead answers by.
	key func(R) K
}

var turnRecords = recordKind[turnRecord, uint64]{
	records: func(ctx context.Context, path string, _ int64, lim Limiter, fn func(raw []byte, r turnRecord) error) ([32]byte, int64, error) {
		return records(ctx, path, lim, func(raw []byte, r turnlog.Record) error {
			return fn(raw, turnRecord{turn: r.TurnID, tenant: r.Tenant})
		})
	},
	key: func(r turnRecord) uint64 { return r.turn },
}

// run compacts seg, a sealed segment of the stream whose segments layout
// names: the steps of the package documentation, the same for every
// stream.
func run[R any, K comparable](ctx context.Context, st segmentStore[R, K], kind recordKind[R, K], layout segment.Layout, seg segment.Info, opts Options) (Result, error) {
	res := Result{Old: seg.ID, New: seg.ID, Before: seg.Length, After: seg.Length}
	sealed, err := st.Sealed(ctx, seg.ID.Start)
	if err != nil {
		return res, fmt.Errorf("compact %s: %w", seg.Path, err)
	}
	next := segment.ID{Start: seg.ID.Start, Gen: seg.ID.Gen + 1}
	switch sealed.ID {
	case seg.ID:
	case next:
		// An earlier compaction's swap committed without its process
		// learning it: finish it.
		res.New, res.After = next, sealed.Length
		return res, finishHooked(ctx, st, layout, next, nil)
	default:
		return res, fmt.Errorf("compact %s: sealed_segments names generation %d", seg.Path, sealed.ID.Gen)
	}
	if sealed.Length != seg.Length {
		return res, fmt.Errorf("compact %s: %d bytes, sealed with %d", seg.Path, seg.Length, sealed.Length)
	}
	// A rewrite left by a compaction whose swap failed: Postgres names
	// the old generation, so it is nothing.
	if err := removeIfThere(layout, next); err != nil {
		return res, fmt.Errorf("compact %s: %w", seg.Path, err)
	}

	recs, err := readChecked(ctx, kind, seg, sealed, opts.Limiter)
	if err != nil {
		return res, fmt.Errorf("compact %s: %w", seg.Path, err)
	}
	res.Records = len(recs)
	dead, err := st.Dead(ctx, recs)
	if err != nil {
		return res, fmt.Errorf("compact %s: dead records: %w", seg.Path, err)
	}
	if len(dead) == 0 {
		return res, nil
	}

	rewrite, dropped, err := write(ctx, kind, seg, layout.Path(next), dead, opts)
	if err != nil {
		return res, fmt.Errorf("compact %s: %w", seg.Path, err)
	}
	rewrite.ID = next
	if err := syncfile.Dir(layout.Dir); err != nil {
		return res, fmt.Errorf("compact %s: sync %s: %w", seg.Path, layout.Dir, err)
	}
	if err := hook(opts.Hook, Synced); err != nil {
		return res, err
	}
	if err := st.Swap(ctx, seg.ID, rewrite); err != nil {
		// The rewrite stays: if the swap committed after all, it is the
		// segment now (see the package documentation).
		return res, fmt.Errorf("compact %s: swap in %s: %w", seg.Path, layout.Name(next), err)
	}
	res.New, res.After, res.Dropped = next, rewrite.Length, dropped
	if err := hook(opts.Hook, Swapped); err != nil {
		return res, err
	}
	return res, finishHooked(ctx, st, layout, next, opts.Hook)
}

// finishHooked installs the rewrite Postgres names and removes the
// generation it replaced.
func finishHooked[R any, K comparable](ctx context.Context, st segmentStore[R, K], layout segment.Layout, rewrite segment.ID, h func(Step) error) error {
	old, err := st.Install(ctx, rewrite)
	if err != nil {
		return fmt.Errorf("compact: install %s: %w", layout.Name(rewrite), err)
	}
	if err := hook(h, Installed); err != nil {
		return err
	}
	if err := os.Remove(old.Path); err != nil {
		return fmt.Errorf("compact: remove %s, replaced by %s: %w", old.Path, layout.Name(rewrite), err)
	}
	if err := syncfile.Dir(layout.Dir); err != nil {
		return fmt.Errorf("compact: remove %s: sync %s: %w", old.Path, layout.Dir, err)
	}
	return nil
}

func hook(h func(Step) error, s Step) error {
	if h == nil {
		return nil
	}
	if err := h(s); err != nil {
		return fmt.Errorf("compaction stopped after step %s: %w", s, err)
	}
	return nil
}

// removeIfThere removes segment id's file, if there is one, durably.
func removeIfThere(layout segment.Layout, id segment.ID) error {
	err := os.Remove(layout.Path(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncfile.Dir(layout.Dir)
}

// records calls fn with each record of the segment file at path, in
// order, after checking its CRC; it returns the file's length and
// BLAKE3. A bad or partial record is an error: a sealed segment holds
// whole, committed records only.
func records(ctx context.Context, path string, lim Limiter, fn func(raw []byte, r turnlog.Record) error) (sum [32]byte, length int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return sum, 0, err
	}
	defer f.Close()
	h := blake3.New()
	r := bufio.NewReaderSize(io.TeeReader(LimitReader(ctx, lim, f), h), 1<<20)
	var b [turnlog.RecordSize]byte
	for ; ; length += turnlog.RecordSize {
		if length%(8192*turnlog.RecordSize) == 0 {
			if err := ctx.Err(); err != nil {
				return sum, 0, err
			}
		}
		n, err := io.ReadFull(r, b[:])
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sum, 0, fmt.Errorf("read %s at %d (%d bytes): %w", path, length, n, err)
		}
		rec, err := turnlog.UnmarshalRecord(b[:])
		if err != nil {
			return sum, 0, fmt.Errorf("record at %d of %s: %w", length, path, err)
		}
		if err := fn(b[:], rec); err != nil {
			return sum, 0, err
		}
	}
	copy(sum[:], h.Sum(nil))
	return sum, length, nil
}

// readChecked returns the records of seg, whose file must be as sealed
// says, reading it through lim.
func readChecked[R any, K comparable](ctx context.Context, kind recordKind[R, K], seg segment.Info, sealed Sealed, lim Limiter) ([]R, error) {
	var recs []R
	sum, length, err := kind.records(ctx, seg.Path, seg.ID.Start, lim, func(_ []byte, r R) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if length != sealed.Length || sum != sealed.BLAKE3 {
		return nil, fmt.Errorf("%s (%d bytes) does not match its seal (%d bytes, BLAKE3 %x): it was damaged after it was sealed; "+
			"run cardbox verify", seg.Path, length, sealed.Length, sealed.BLAKE3[:8])
	}
	return recs, nil
}

// flushStep is how many bytes of a rewrite are written before they are
// handed to the disk (syncfile.Trickle).
const flushStep = 1 << 20

// write writes the records of seg's file that are not dead to a new
// file at to, in order, fsyncs it, and returns its length and BLAKE3 and
// how many records it left out. It reads and writes through
// opts.Limiter. Before the swap, a failure removes the new file.
func write[R any, K comparable](ctx context.Context, kind recordKind[R, K], seg segment.Info, to string, dead map[K]bool, opts Options) (rewrite Sealed, dropped int, err error) {
	h := opts.Hook
	f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return rewrite, 0, err
	}
	crashed := false
	defer func() {
		if err != nil && !crashed {
			f.Close()
			os.Remove(to)
		}
	}()
	sum := blake3.New()
	// Handed to the disk a step at a time as it is written
	// (syncfile.Trickle): the fsync below then finds little left to
	// flush, and the appends' fdatasyncs never queue behind a segment's
	// worth of dirty pages.
	out := syncfile.NewTrickle(f, 0, flushStep)
	w := bufio.NewWriterSize(io.MultiWriter(LimitWriter(ctx, opts.Limiter, out), sum), 1<<20)
	_, _, err = kind.records(ctx, seg.Path, seg.ID.Start, opts.Limiter, func(raw []byte, r R) error {
		if dead[kind.key(r)] {
			dropped++
			return nil
		}
		rewrite.Length += int64(len(raw))
		_, err := w.Write(raw)
		return err
	})
	if err != nil {
		return rewrite, 0, err
	}
	if err := w.Flush(); err != nil {
		return rewrite, 0, fmt.Errorf("write %s: %w", to, err)
	}
	if err := hook(h, Written); err != nil {
		crashed = true
		f.Close()
		return rewrite, 0, err
	}
	if err := f.Sync(); err != nil {
		return rewrite, 0, fmt.Errorf("sync %s: %w", to, err)
	}
	if err := f.Close(); err != nil {
		return rewrite, 0, fmt.Errorf("close %s: %w", to, err)
	}
	copy(rewrite.BLAKE3[:], sum.Sum(nil))
	return rewrite, dropped, nil
}
