package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/store/blobpack"
	"github.com/cardboxhq/cardbox/store/internal/damage"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/segment"
)

// What to run when the files and the database disagree.
const (
	adviceVerify  = damage.AdviceVerify
	adviceRecover = "run `cardbox recover` (offline) to rebuild the turn log from Postgres"
	adviceBackup  = damage.AdviceBackup
)

// checkDirs refuses to start on a data directory that lost blobs/ or
// turns/ while the database says it holds committed turns: starting would
// create empty ones and serve nothing.
func checkDirs(dir string, state storedb.GetTurnLogStateRow) error {
	if state.CommittedEnd == 0 {
		return nil // nothing committed yet
	}
	for _, d := range []struct{ path, advice string }{
		{blobDir(dir), adviceBackup},
		{filepath.Dir(turnLogPath(dir)), adviceRecover},
	} {
		if _, err := os.Stat(d.path); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s is missing, but the database holds committed turns (turn log committed up to byte %d): "+
				"refusing to start; %s, or %s", d.path, state.CommittedEnd, d.advice, adviceVerify)
		}
	}
	return nil
}

// openBlobs opens the blob pack, never cutting it below its committed end,
// and records the damaged regions it kept. A store whose commits predate
// the recorded end has it validated now and recorded.
func (e *Engine) openBlobs(ctx context.Context, state storedb.GetTurnLogStateRow) error {
	var err error
	e.blobs, err = blobpack.Open(blobDir(e.opts.Dir), blobpack.Options{
		Reserve: e.opts.fileReserve(), MinValidSize: max(state.PackEnd, 0), OnDamage: e.onPackDamage,
		SegmentSize: e.opts.SegmentSize, OnRollover: e.packRolledOver,
	})
	if errors.Is(err, blobpack.ErrCorrupt) {
		return fmt.Errorf("blob pack: %w: committed blobs are missing; refusing to start; %s, and %s", err, adviceVerify, adviceBackup)
	}
	if err != nil {
		return err
	}
	// What Open kept are whole, valid records: there for good.
	e.sealer.PackDurable(e.blobs.Stats().PackBytes)
	if state.PackEnd < 0 && state.CommittedEnd > 0 {
		err := e.as(pgrole.Recovery, "").SetPackEnd(ctx, storedb.SetPackEndParams{
			PackEnd: e.blobs.Stats().PackBytes, StoreID: e.storeID, CommittedEnd: state.CommittedEnd,
		})
		if err != nil {
			return fmt.Errorf("record the blob pack's end: %w", err)
		}
	}
	return e.recordHoles(ctx)
}

// packRolledOver is the pack's segment.Options.OnRollover: the segment
// closed is there for good (every record of the pack is fsynced before
// it is published, and no valid one is ever cut back), so the sealer
// seals it without waiting for a commit row to record the pack's end,
// which a group of blobs alone does not write.
func (e *Engine) packRolledOver(seg segment.Info) { e.sealer.PackDurable(seg.End()) }

// recordHoles logs every damaged region Open found at ERROR and records
// it in Postgres.
func (e *Engine) recordHoles(ctx context.Context) error {
	for _, h := range e.blobs.Holes() {
		var hash []byte
		if h.HashKnown {
			hash = h.Hash[:]
		}
		e.log.Error("blob pack: damaged record kept as a hole; its blob cannot be read, every other blob can",
			"offset", h.Offset, "end", h.End, "blob", fmt.Sprintf("%x", hash), "reason", h.Reason, "advice", adviceVerify)
		if err := e.recordHole(ctx, h, 0); err != nil {
			return fmt.Errorf("record blob pack hole at %d: %w", h.Offset, err)
		}
	}
	return nil
}

// crossCheck makes sure every committed turn's payload and every attached
// fs root is in the pack, or in a hole the pack reported (see
// damage.CrossCheck).
func (e *Engine) crossCheck(ctx context.Context, maxTurn uint64) error {
	holes := e.blobs.Holes()
	check := damage.CrossCheck{Has: e.blobs.Has, Lost: &e.lost}
	for id := uint64(1); id <= maxTurn; id++ {
		if m, ok := e.index.Turns.Get(id); ok && m.Tenant != 0 {
			check.Note(m.Hash, m.Tenant, func() string { return fmt.Sprintf("payload of turn %d", id) })
		}
	}
	roots, err := e.as(pgrole.Recovery, "").ListFSRoots(ctx)
	if err != nil {
		return fmt.Errorf("list fs roots: %w", err)
	}
	for _, r := range roots {
		check.Note(ident.Hash(r), 0, func() string { return "an attached fs root" })
	}
	return check.Verdict(e.log, holes, blobDir(e.opts.Dir))
}
