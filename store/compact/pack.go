package compact

import (
	"context"
	"io"

	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/segment"
)

// PackStore is what a compaction of the blob pack needs of the store. Its
// methods are called by one compaction at a time.
type PackStore interface {
	// Sealed returns the pack's sealed segment starting at start, as
	// Postgres records it now.
	Sealed(ctx context.Context, start int64) (Sealed, error)
	// Dead returns which of the blobs the records hold the compaction
	// drops: no tenant claims them any more, and no put or append
	// deduplicated against them since the compaction began (see
	// blobpack.Pack.Condemn); it waits first for the puts and appends
	// whose lookups came before to commit their claims or fail.
	Dead(ctx context.Context, records []blobpack.Entry) (map[blobpack.Hash]bool, error)
	// Swap makes rewrite the sealed segment of its range in place of
	// old, and forgets the pack_holes of the range (the rewrite holds
	// good records only) and the released claims to the blobs dropped
	// (bytes stored again are their writer's as a first writer's), in
	// one Postgres transaction; it fails if
	// Postgres names another generation than old, or if a blob Dead
	// returned is claimed again.
	Swap(ctx context.Context, old segment.ID, rewrite Sealed) error
	// Install makes the running pack read the rewrite, which Postgres
	// names, and returns the generation it replaced, whose file is
	// closed and left for the compaction to remove.
	Install(ctx context.Context, rewrite segment.ID) (segment.Info, error)
}

var packRecords = recordKind[blobpack.Entry, blobpack.Hash]{
	records: func(ctx context.Context, path string, start int64, lim Limiter, fn func(raw []byte, e blobpack.Entry) error) ([32]byte, int64, error) {
		return blobpack.SegmentRecordsThrough(ctx, path, start, func(r io.Reader) io.Reader { return LimitReader(ctx, lim, r) }, fn)
	},
	key: func(e blobpack.Entry) blobpack.Hash { return e.Hash },
}

// Pack compacts seg, a sealed segment of the blob pack whose segments
// layout names: the steps of the package documentation, with the blobs
// no tenant claims any more as the dead records. Records keep their
// bytes; the index and blobs.idx, which name them by offset, follow in
// Install.
func Pack(ctx context.Context, st PackStore, layout segment.Layout, seg segment.Info, opts Options) (Result, error) {
	return run[blobpack.Entry, blobpack.Hash](ctx, st, packRecords, layout, seg, opts)
}
