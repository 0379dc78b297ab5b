package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
	"github.com/cardboxhq/cardbox/store/blobpack"
)

// What to run when the files and the database disagree.
const (
	adviceVerify  = "run `cardbox verify` to list what is damaged or missing"
	adviceRecover = "run `cardbox recover` (offline) to rebuild the turn log from Postgres"
	adviceBackup  = "restore blobs/ from a backup of this data directory"
)

// checkDirs refuses to start on a data directory that lost blobs/ or
// turns/ while the database says it holds committed turns: starting would
// create empty ones and serve nothing.
func checkDirs(dir string, state db.GetTurnLogStateRow) error {
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
func (e *Engine) openBlobs(ctx context.Context, state db.GetTurnLogStateRow) error {
	var err error
	e.blobs, err = blobpack.Open(blobDir(e.opts.Dir), blobpack.Options{
		Reserve: e.opts.fileReserve(), MinValidSize: max(state.PackEnd, 0), OnDamage: e.onPackDamage,
	})
	if errors.Is(err, blobpack.ErrCorrupt) {
		return fmt.Errorf("blob pack: %w: committed blobs are missing; refusing to start; %s, and %s", err, adviceVerify, adviceBackup)
	}
	if err != nil {
		return err
	}
	if state.PackEnd < 0 && state.CommittedEnd > 0 {
		err := e.as(pgrole.Recovery, "").SetPackEnd(ctx, db.SetPackEndParams{
			PackEnd: e.blobs.Stats().PackBytes, StoreID: e.storeID, CommittedEnd: state.CommittedEnd,
		})
		if err != nil {
			return fmt.Errorf("record the blob pack's end: %w", err)
		}
	}
	return e.recordHoles(ctx)
}

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
// fs root is in the pack, or in a hole the pack reported. A blob missing
// for no such reason means the pack is not the one the turns were written
// to (or lost records wholesale): the store refuses to start.
func (e *Engine) crossCheck(ctx context.Context, maxTurn uint64) error {
	holes := e.blobs.Holes()
	unidentified := 0
	for _, h := range holes {
		if !h.HashKnown {
			unidentified++
		}
	}
	var missing, damaged int
	var first string
	// what describes the blob only for the first missing one: formatting
	// it for each of millions of turns was a noticeable part of a start.
	// A turn's missing payload is remembered as its tenant's (see
	// lostBlobs); an fs root's tenant is not known here.
	note := func(hash ident.Hash, tenant uint32, what func() string) {
		err := e.blobs.Has(hash)
		switch {
		case err == nil:
		case errors.Is(err, blobpack.ErrDamaged):
			damaged++
		default:
			if missing++; missing == 1 {
				first = fmt.Sprintf("%s, blob %x", what(), hash)
			}
			if tenant != 0 {
				e.lost.add(tenant, hash)
			}
		}
	}
	for id := uint64(1); id <= maxTurn; id++ {
		if m, ok := e.index.Turns.Get(id); ok && m.Tenant != 0 {
			note(m.Hash, m.Tenant, func() string { return fmt.Sprintf("payload of turn %d", id) })
		}
	}
	roots, err := e.as(pgrole.Recovery, "").ListFSRoots(ctx)
	if err != nil {
		return fmt.Errorf("list fs roots: %w", err)
	}
	for _, r := range roots {
		note(ident.Hash(r), 0, func() string { return "an attached fs root" })
	}
	return e.judgeCrossCheck(missing, damaged, unidentified, first)
}

func (e *Engine) judgeCrossCheck(missing, damaged, unidentified int, first string) error {
	if damaged > 0 {
		e.log.Error("blob pack: committed blobs lie in damaged records; reading them fails", "blobs", damaged, "advice", adviceVerify)
	}
	if missing == 0 {
		return nil
	}
	if unidentified > 0 {
		e.log.Error("blob pack: committed blobs are missing, presumably in damaged regions the index no longer describes",
			"blobs", missing, "holes", unidentified, "first", first, "advice", adviceVerify)
		return nil
	}
	return fmt.Errorf("%d committed blobs are neither in %s nor in a damaged record (first: %s): "+
		"refusing to start; %s, and %s", missing, blobDir(e.opts.Dir), first, adviceVerify, adviceBackup)
}
