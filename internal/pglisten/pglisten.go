// Package pglisten follows a Postgres notification channel through
// reconnections, for the watches of other processes' administration
// (revoked keys, deleted tenants).
package pglisten

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Watch calls changed with the payload of every notification on channel
// until ctx ends, reconnecting after failures (logged to log). While the
// listening connection is down notifications are lost, so after every
// (re)connection changed("") says "anything may have changed". It returns
// when ctx ends.
func Watch(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, channel string, changed func(payload string)) {
	for ctx.Err() == nil {
		err := listen(ctx, pool, channel, changed)
		if ctx.Err() != nil {
			return
		}
		// Postgres went away: try again soon, as revocations wait on it.
		log.Warn("listening for changes failed; retrying", "channel", channel, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// listen holds one LISTEN connection until it fails or ctx ends.
func listen(ctx context.Context, pool *pgxpool.Pool, channel string, changed func(payload string)) error {
	pooled, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", channel, err)
	}
	// The connection carries a LISTEN: it never goes back to the pool.
	conn := pooled.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		return fmt.Errorf("listen on %s: %w", channel, err)
	}
	changed("") // anything may have changed while nobody listened
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for notifications on %s: %w", channel, err)
		}
		changed(n.Payload)
	}
}
