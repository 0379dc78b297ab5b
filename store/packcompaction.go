package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/compact"
	"github.com/cardboxhq/cardbox/store/internal/sealer"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/internal/usage"
	"github.com/cardboxhq/cardbox/store/segment"
)

// CompactPackSegment rewrites the sealed blob-pack segment that starts at
// start without the records of the blobs no tenant claims any more (their
// first storer is a deleted tenant or released its claim, and no tenant
// holds a grant),
// and swaps the rewrite in (package compact; docs/storage.md,
// Compaction). A segment without such blobs is left as it is. Appends,
// puts and reads go on meanwhile: a put or an append of a blob the
// compaction drops stores it again. Compactions (of the pack and of the
// turn log) run one at a time, and Close waits for a running one.
func (e *Engine) CompactPackSegment(ctx context.Context, start int64) (compact.Result, error) {
	e.compactMu.Lock()
	defer e.compactMu.Unlock()
	if e.closed.Load() {
		return compact.Result{}, fmt.Errorf("compact the blob pack: %w", blobpack.ErrClosed)
	}
	seg, err := e.sealedSegment(sealer.Blobs, e.blobs.Closed(), start)
	if err != nil {
		return compact.Result{}, fmt.Errorf("compact the blob pack: %w", err)
	}
	stop, err := e.blobs.BeginCompaction(start)
	if err != nil {
		return compact.Result{}, err
	}
	c := &packCompaction{e: e}
	e.deadBlobs.Begin(start)
	res, err := compact.Pack(ctx, c, blobpack.Layout(BlobDir(e.opts.Dir)), seg,
		compact.Options{Hook: e.opts.CompactionHook, Limiter: e.opts.CompactionLimiter})
	e.deadBlobs.Done(start, res.Reclaimed(), settles(res, err))
	stop()
	if err != nil {
		if c.condemned != nil && !c.swapTried {
			// Postgres names the old generation still: the blobs the
			// compaction meant to drop stay.
			e.blobs.Release(start)
		}
		return res, err
	}
	e.logCompacted("blob pack segment compacted", seg, res)
	return res, nil
}

// CompactPackSegmentsReporting compacts the sealed segments of the blob
// pack at starts, one after another, telling progress as
// CompactTurnsReporting does.
func (e *Engine) CompactPackSegmentsReporting(ctx context.Context, starts []int64,
	progress func(done, total int, res compact.Result)) ([]compact.Result, error) {
	return compactEach(ctx, starts, e.CompactPackSegment, progress)
}

// CompactPackReporting compacts every sealed segment of the blob pack
// that holds blobs no tenant claims any more, one after another, telling
// progress, if set, as CompactTurnsReporting does, and returns what each
// compaction of a segment did.
func (e *Engine) CompactPackReporting(ctx context.Context, progress func(done, total int, res compact.Result)) ([]compact.Result, error) {
	return e.CompactPackSegmentsReporting(ctx, e.sealedStarts(sealer.Blobs, e.blobs.Closed()), progress)
}

// sealedStarts returns the starts of the closed segments that are sealed.
func (e *Engine) sealedStarts(stream string, closed []segment.Info) []int64 {
	var starts []int64
	for _, seg := range closed {
		if e.sealer.IsSealed(stream, seg.ID.Start) {
			starts = append(starts, seg.ID.Start)
		}
	}
	return starts
}

// compactEach compacts the segments starting at starts with one, in
// order, telling progress, if set, once they are listed (done 0, a zero
// Result) and as each ends; it stops at the first failure.
func compactEach(ctx context.Context, starts []int64, one func(context.Context, int64) (compact.Result, error),
	progress func(done, total int, res compact.Result)) ([]compact.Result, error) {
	if progress != nil {
		progress(0, len(starts), compact.Result{})
	}
	out := make([]compact.Result, 0, len(starts))
	for _, start := range starts {
		res, err := one(ctx, start)
		if err != nil {
			return out, err
		}
		out = append(out, res)
		if progress != nil {
			progress(len(out), len(starts), res)
		}
	}
	return out, nil
}

// errClaimedAgain fails a compaction of the pack whose swap found a blob
// it drops claimed again (a tenant stored the bytes while it ran).
var errClaimedAgain = errors.New("a blob the compaction drops was claimed again meanwhile; compact the segment again")

// packCompaction is the engine as package compact sees it, for one
// compaction of a blob-pack segment.
type packCompaction struct {
	e *Engine
	// condemned are the blobs Dead returned, by the tenant ids of the
	// first storers of their records, which Swap asks about again.
	condemned map[blobpack.Hash][]string
	// owners are the first storers of the condemned blobs' records, by
	// tenant number, with the blobs' sizes: their released claims go
	// with the records (Swap).
	owners    []usage.Grant
	sizes     map[blobpack.Hash]int64
	swapTried bool
}

func (c *packCompaction) Sealed(ctx context.Context, start int64) (compact.Sealed, error) {
	return sealedSegment(ctx, c.e, sealer.Blobs, start)
}

// sealedSegment reads one sealed segment's row.
func sealedSegment(ctx context.Context, e *Engine, stream string, start int64) (compact.Sealed, error) {
	row, err := e.as(pgrole.Recovery, "").GetSealedSegment(ctx, storedb.GetSealedSegmentParams{
		StoreID: e.storeID, Stream: stream, StartOffset: start,
	})
	if err != nil {
		return compact.Sealed{}, fmt.Errorf("read the seal of the %s segment at %d: %w", stream, start, err)
	}
	s := compact.Sealed{ID: segment.ID{Start: start, Gen: uint32(row.Generation)}, Length: row.Length}
	copy(s.BLAKE3[:], row.Blake3)
	return s, nil
}

// Dead asks Postgres which of the records' blobs no tenant claims: the
// tenant that stored a record's blob first (its owner, a tenant number,
// named by its id as tenants lists it, deleted ones included) is deleted
// or released its claim (released_blob_claims), and no tenant_blobs row
// names the blob. A blob with records of several
// first storers (stored again after its record was found damaged) is
// dead only when every one is. Of those, the pack keeps any a lookup
// found since the compaction began (blobpack.Pack.Condemn); the puts and
// append groups whose lookups came before are waited for first.
func (c *packCompaction) Dead(ctx context.Context, records []blobpack.Entry) (map[blobpack.Hash]bool, error) {
	// A put or an append group that looked a blob up before the pack
	// watched the segment has its claim committed, or never will, before
	// Postgres is asked: the lookups that found a blob of the segment
	// since are the pack's to keep (Condemn).
	if err := c.e.dedup.Wait(ctx); err != nil {
		return nil, fmt.Errorf("wait for the puts and appends in flight: %w", err)
	}
	rows, err := c.e.as(pgrole.Recovery, "").ListTenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	ids := make(map[uint32]string, len(rows))
	for _, r := range rows {
		ids[uint32(r.TenantNo)] = r.TenantID
	}
	writers := map[blobpack.Hash][]string{}
	for _, r := range records {
		id, known := ids[r.Owner]
		if !known {
			id = "" // no tenant: never a deleted one, so the blob stays
		}
		if !slices.Contains(writers[r.Hash], id) {
			writers[r.Hash] = append(writers[r.Hash], id)
		}
	}
	dead, err := deadBlobs(ctx, c.e.as(pgrole.Recovery, ""), writers)
	if err != nil {
		return nil, err
	}
	dropped, err := c.e.blobs.Condemn(dead)
	if err != nil {
		return nil, err
	}
	// The dead blobs a lookup found since the compaction began stay: if
	// no claim came of it, they are still dead, so they are counted
	// again, past this compaction.
	var kept []blobpack.Hash
	for h := range dead {
		if !dropped[h] {
			kept = append(kept, h)
		}
	}
	c.e.NoteDeadBlobs(kept)
	c.condemned = make(map[blobpack.Hash][]string, len(dropped))
	for h := range dropped {
		c.condemned[h] = writers[h]
	}
	// A set, not slices.Contains over the list: a segment drops hundreds
	// of thousands of blobs, and the scan made this quadratic (minutes of
	// a core per segment, docs/performance.md).
	c.owners, c.sizes = nil, make(map[blobpack.Hash]int64, len(dropped))
	seen := make(map[usage.Grant]struct{}, len(dropped))
	for _, r := range records {
		if !dropped[r.Hash] {
			continue
		}
		c.sizes[r.Hash] = int64(r.RawLen)
		g := usage.Grant{Tenant: r.Owner, Hash: r.Hash}
		if _, ok := seen[g]; !ok {
			seen[g] = struct{}{}
			c.owners = append(c.owners, g)
		}
	}
	return dropped, nil
}

// deadBlobs returns the blobs of writers (each with the ids of the
// tenants that stored its records first) that UnclaimedBlobs finds no
// tenant claims for every one of their first storers: that storer is
// deleted or released its claim, and no tenant holds a grant.
func deadBlobs(ctx context.Context, q *storedb.Queries, writers map[blobpack.Hash][]string) (map[blobpack.Hash]bool, error) {
	var p storedb.UnclaimedBlobsParams
	for h, ids := range writers {
		for _, id := range ids {
			p.BlobHashes = append(p.BlobHashes, h[:])
			p.FirstWriters = append(p.FirstWriters, id)
		}
	}
	if len(p.BlobHashes) == 0 {
		return nil, nil
	}
	rows, err := q.UnclaimedBlobs(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("unclaimed blobs: %w", err)
	}
	count := map[blobpack.Hash]int{}
	for _, r := range rows {
		if len(r) == len(blobpack.Hash{}) {
			count[blobpack.Hash(r)]++
		}
	}
	dead := map[blobpack.Hash]bool{}
	for h, n := range count {
		if n == len(writers[h]) {
			dead[h] = true
		}
	}
	return dead, nil
}

// Swap, in one transaction, asks again whether the blobs the compaction
// drops are dead (a claim committed since Dead asked fails the swap),
// swaps the segment's sealed_segments row to the rewrite, forgets the
// pack_holes of its range and the released claims to the blobs it drops
// (released_blob_claims). Once it commits, the ledger forgets those
// claims too (usage.Ledger.Unrelease): bytes stored again are a new
// record, their writer's as any first writer's.
func (c *packCompaction) Swap(ctx context.Context, old segment.ID, rewrite compact.Sealed) error {
	c.swapTried = true
	_, _, next, ok := c.e.blobs.Span(old.Start)
	if !ok || next < 0 {
		return fmt.Errorf("no closed segment of the blob pack starts at %d", old.Start)
	}
	err := pgx.BeginFunc(ctx, c.e.pool, func(tx pgx.Tx) error {
		q := storedb.New(pgrole.As(tx, pgrole.Recovery, ""))
		still, err := deadBlobs(ctx, q, c.condemned)
		if err != nil {
			return err
		}
		if len(still) != len(c.condemned) {
			return errClaimedAgain
		}
		n, err := q.SwapSealedSegment(ctx, storedb.SwapSealedSegmentParams{
			StoreID: c.e.storeID, Stream: sealer.Blobs, StartOffset: old.Start,
			OldGeneration: int32(old.Gen), NewGeneration: int32(rewrite.ID.Gen),
			Length: rewrite.Length, Blake3: rewrite.BLAKE3[:],
		})
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("sealed_segments no longer names generation %d of the blob pack segment at %d", old.Gen, old.Start)
		}
		if _, err := q.ForgetPackHolesIn(ctx, storedb.ForgetPackHolesInParams{
			StoreID: c.e.storeID, StartOffset: old.Start, EndOffset: next,
		}); err != nil {
			return fmt.Errorf("forget the holes of the rewritten segment: %w", err)
		}
		if len(c.condemned) == 0 {
			return nil
		}
		hashes := make([][]byte, 0, len(c.condemned))
		for h := range c.condemned {
			hashes = append(hashes, h[:])
		}
		sweep := storedb.New(pgrole.As(tx, pgrole.Sweeper, ""))
		if err := sweep.DropReleasedBlobClaims(ctx, hashes); err != nil {
			return fmt.Errorf("forget the released claims to the blobs dropped: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, g := range c.owners {
		c.e.usage.Unrelease(g, c.sizes[g.Hash])
	}
	return nil
}

func (c *packCompaction) Install(ctx context.Context, rewrite segment.ID) (segment.Info, error) {
	old, err := c.e.blobs.Install(ctx, rewrite)
	if err != nil {
		return old, err
	}
	c.e.sealer.MarkSealed(sealer.Blobs, rewrite)
	return old, nil
}
