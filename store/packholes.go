package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgbound"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/sqlc/db"
	"github.com/cardboxhq/cardbox/store/blobpack"
)

// Records of the blob pack found damaged when read (a flipped byte in
// stored bytes that start-up does not verify) become holes like those
// recovery finds: the pack stops reading them (blobpack.Options.OnDamage),
// and the store logs each at ERROR and has package holerecorder record it
// in pack_holes, where cardbox_blob_pack_holes, /healthz and the next
// start (see recheckRecordedHoles) find it.

// onPackDamage is the pack's blobpack.Options.OnDamage: it runs in the
// goroutine of the read that found the damage, so it only logs and
// queues.
func (e *Engine) onPackDamage(h blobpack.Hole) {
	e.log.Error("blob pack: record found damaged when read, kept as a hole; its blob cannot be read (until it is stored again), every other blob can",
		"offset", h.Offset, "end", h.End, "blob", fmt.Sprintf("%x", h.Hash), "reason", h.Reason, "advice", adviceVerify)
	e.holes.Add(h)
}

// recordHole records h in pack_holes, once: a hole already recorded (by
// its start offset) is left as it is. timeout > 0 bounds the statement.
func (e *Engine) recordHole(ctx context.Context, h blobpack.Hole, timeout time.Duration) error {
	var hash []byte
	if h.HashKnown {
		hash = h.Hash[:]
	}
	ctx, cancel := pgbound.Context(ctx, timeout)
	defer cancel()
	return e.as(pgrole.Recovery, "").RecordPackHole(ctx, db.RecordPackHoleParams{
		StoreID: e.storeID, StartOffset: h.Offset, EndOffset: h.End, BlobHash: hash, Reason: h.Reason,
	})
}

// recheckRecordedHoles reads again each record that pack_holes names by
// its blob and the index still lists there: one an earlier process found
// damaged when read, which Open does not find (it verifies the records of
// the last MiB only). One still damaged is a hole again (the read tells
// onPackDamage); one that reads (its bytes restored) is not. A blob
// stored again since has a later record, which the index lists instead.
func (e *Engine) recheckRecordedHoles(ctx context.Context) error {
	rows, err := e.as(pgrole.Recovery, "").ListPackHoles(ctx, e.storeID)
	if err != nil {
		return fmt.Errorf("list blob pack holes: %w", err)
	}
	for _, r := range rows {
		if len(r.BlobHash) != len(ident.Hash{}) {
			continue
		}
		entry, ok := e.blobs.Lookup(ident.Hash(r.BlobHash))
		if !ok || entry.Offset != r.StartOffset || entry.End() != r.EndOffset {
			continue
		}
		if _, err := e.blobs.ReadEntry(entry); err != nil && !errors.Is(err, blobpack.ErrDamaged) {
			return fmt.Errorf("read blob pack record at %d again: %w", entry.Offset, err)
		}
	}
	return nil
}
