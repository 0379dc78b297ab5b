// This file is written by hand, not generated: sqlc collects a :many
// query's rows into a slice, and the queries here are read row by row.

package db

import "context"

// ForEachNewestIdempotencyKey runs ListNewestIdempotencyKeys and hands fn
// each row as it arrives, rather than collecting them all first. The row
// is reused: fn must copy what it keeps (IdempotencyKey included). An
// error from fn stops the query and is returned.
func (q *Queries) ForEachNewestIdempotencyKey(ctx context.Context, arg ListNewestIdempotencyKeysParams, fn func(*ListNewestIdempotencyKeysRow) error) error {
	rows, err := q.db.Query(ctx, listNewestIdempotencyKeys, arg.Since, arg.MaxKeys)
	if err != nil {
		return err
	}
	defer rows.Close()
	var i ListNewestIdempotencyKeysRow
	for rows.Next() {
		if err := rows.Scan(
			&i.TenantNo,
			&i.ContextID,
			&i.IdempotencyKey,
			&i.TurnID,
			&i.CreatedAt,
			&i.RequestedParentTurnID,
		); err != nil {
			return err
		}
		if err := fn(&i); err != nil {
			return err
		}
	}
	return rows.Err()
}
