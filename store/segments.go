package store

import (
	"context"

	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/internal/sealer"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// checkSealed is recovery's check of the sealed segments against the
// files (sealer.Sealer.Check).
func (e *Engine) checkSealed(ctx context.Context) error {
	return e.sealer.Check(ctx, e.as(pgrole.Recovery, ""), e.storeID, e.blobs, e.turns,
		"committed bytes are missing; refusing to start; "+adviceVerify+", and "+adviceBackup)
}

// settleGenerations removes, of two generations of one segment, the file
// sealed_segments does not name (sealer.Settle).
func (e *Engine) settleGenerations(ctx context.Context) error {
	return sealer.Settle(ctx, e.as(pgrole.Recovery, ""), e.storeID,
		blobpack.Layout(BlobDir(e.opts.Dir)), turnlog.Layout(TurnLogPath(e.opts.Dir)), e.log)
}

// startSealer starts the goroutine that seals closed segments.
func (e *Engine) startSealer() {
	e.sealer.Start(e.as(pgrole.Recovery, ""), e.storeID, e.blobs, e.turns, e.log)
}

// The states of a segment SegmentStats counts: sealed (closed, its bytes
// all committed and recorded in sealed_segments), closed (not written
// any more, waiting for its last group's COMMIT or for the sealer), and
// active (the one appends write).
const (
	SegmentSealed = sealer.Sealed
	SegmentClosed = sealer.Closed
	SegmentActive = sealer.Active
)

// SegmentStats counts the segments of one file in one state: File is
// FileBlobs or FileTurns, State SegmentSealed, SegmentClosed or
// SegmentActive.
type SegmentStats = sealer.Stats
