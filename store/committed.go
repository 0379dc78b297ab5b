package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cardboxhq/cardbox/store/internal/sealer"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
	"github.com/cardboxhq/cardbox/store/segment"
)

// Committed is what Postgres records of a turn store's latest commit:
// how far it made the turn log and the blob pack durable, and the id its
// next turn gets. Files cut at these ends hold exactly the turns the
// database's rows name, which is how a backup copies them.
type Committed struct {
	// StoreID is the turn store's id, as its data directory's STORE_ID
	// file holds it (ReadStoreID).
	StoreID uuid.UUID
	// TurnLog is the committed end of the turn log: 0 before the first
	// commit.
	TurnLog int64
	// Pack is the committed end of the blob pack: -1 when unknown, before
	// the first commit or when that commit was made before the end was
	// recorded (the next start records it).
	Pack int64
	// NextTurnID is the id the next appended turn gets: 1 before the
	// first commit.
	NextTurnID int64
}

// ReadCommitted reads, in tx, the turn store and its latest commit. A
// backup reads it in the transaction whose snapshot it dumps, so that
// the rows and the ends agree. A database without a turn store yet
// answers pgx.ErrNoRows (wrapped).
func ReadCommitted(ctx context.Context, tx pgx.Tx) (Committed, error) {
	state, err := storedb.New(tx).GetTurnLogState(ctx)
	if err != nil {
		return Committed{}, fmt.Errorf("read the turn store's latest commit: %w", err)
	}
	return Committed{
		StoreID:    uuid.UUID(state.StoreID.Bytes),
		TurnLog:    state.CommittedEnd,
		Pack:       state.PackEnd,
		NextTurnID: state.NextTurnID,
	}, nil
}

// SealedSegment is a segment of one of the store's files whose bytes are
// all committed, as sealed_segments records it: it never changes again
// but by a compaction, which gives it a new generation (a new file name).
type SealedSegment struct {
	// File is the data directory's file the segment belongs to:
	// FileBlobs or FileTurns.
	File string
	// ID is the segment's first offset in its file's stream and its
	// generation, which name its file (segment.Layout.Name).
	ID segment.ID
	// Length is how many bytes it holds.
	Length int64
	// BLAKE3 is the hash of its bytes.
	BLAKE3 [32]byte
}

// The files of sealed segments: the blob pack and the turn log.
const (
	FileBlobs = sealer.Blobs
	FileTurns = sealer.Turns
)

// ReadSealed reads, in tx, the store's sealed segments, by file and
// offset. A backup reads them in the transaction whose snapshot it
// dumps, to take a sealed segment over from its previous backup by name
// and hash, and to check the bytes it copies.
func ReadSealed(ctx context.Context, tx pgx.Tx, storeID uuid.UUID) ([]SealedSegment, error) {
	rows, err := storedb.New(tx).ListSealedSegments(ctx, pgtype.UUID{Bytes: storeID, Valid: true})
	if err != nil {
		return nil, fmt.Errorf("read the sealed segments: %w", err)
	}
	out := make([]SealedSegment, 0, len(rows))
	for _, r := range rows {
		s := SealedSegment{File: r.Stream, ID: segment.ID{Start: r.StartOffset, Gen: uint32(r.Generation)}, Length: r.Length}
		if copy(s.BLAKE3[:], r.Blake3) != len(s.BLAKE3) {
			return nil, fmt.Errorf("sealed segment at %d of the %s: a BLAKE3 of %d bytes", r.StartOffset, r.Stream, len(r.Blake3))
		}
		out = append(out, s)
	}
	return out, nil
}
