package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/store/internal/storedb"
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
