// This file is written by hand, not generated: sqlc collects a :many
// query's rows into a slice, and the queries here are read row by row.

package storedb

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// ForEachNewestIdempotencyKey runs ListNewestIdempotencyKeys and hands fn
// each row as it arrives, rather than collecting them all first, and
// without allocating per row: the row, and its IdempotencyKey, which is
// the driver's memory, are valid only until fn returns. An error from fn
// stops the query and is returned.
func (q *Queries) ForEachNewestIdempotencyKey(ctx context.Context, arg ListNewestIdempotencyKeysParams, fn func(*ListNewestIdempotencyKeysRow) error) error {
	rows, err := q.db.Query(ctx, listNewestIdempotencyKeys, arg.Since, arg.MaxKeys)
	if err != nil {
		return err
	}
	var i ListNewestIdempotencyKeysRow
	var key pgtype.DriverBytes
	_, err = pgx.ForEachRow(rows, []any{
		&i.TenantNo,
		&i.ContextID,
		&key,
		&i.TurnID,
		&i.CreatedAt,
		&i.RequestedParentTurnID,
	}, func() error {
		i.IdempotencyKey = key
		return fn(&i)
	})
	return err
}

// ForEachOlderIdempotencyKey runs ListOlderIdempotencyKeys and hands fn
// each row as ForEachNewestIdempotencyKey does: valid only until fn
// returns.
func (q *Queries) ForEachOlderIdempotencyKey(ctx context.Context, arg ListOlderIdempotencyKeysParams, fn func(*ListOlderIdempotencyKeysRow) error) error {
	rows, err := q.db.Query(ctx, listOlderIdempotencyKeys, arg.Since, arg.Until)
	if err != nil {
		return err
	}
	var i ListOlderIdempotencyKeysRow
	var key pgtype.DriverBytes
	_, err = pgx.ForEachRow(rows, []any{&i.TenantNo, &i.ContextID, &key, &i.CreatedAt}, func() error {
		i.IdempotencyKey = key
		return fn(&i)
	})
	return err
}
