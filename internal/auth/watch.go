package auth

import (
	"context"
	"fmt"
	"time"
)

// keysChannel is the Postgres notification channel of key changes; the
// payload is the key id.
const keysChannel = "cardbox_keys"

// Watch calls changed with the id of every key that is revoked, in any
// process, until ctx ends; its caller re-checks the sessions of that key.
// While the listening connection is down notifications are lost, so after
// every (re)connection changed("") says "re-check every session". It
// returns when ctx ends.
func (k *Keys) Watch(ctx context.Context, changed func(keyID string)) error {
	for ctx.Err() == nil {
		err := k.listen(ctx, changed)
		if ctx.Err() != nil {
			break
		}
		// Postgres went away: try again soon, as revocations wait on it.
		k.log.Warn("listening for API key changes failed; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// listen holds one LISTEN connection until it fails or ctx ends.
func (k *Keys) listen(ctx context.Context, changed func(keyID string)) error {
	pooled, err := k.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen for key changes: %w", err)
	}
	// The connection carries a LISTEN: it never goes back to the pool.
	conn := pooled.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+keysChannel); err != nil {
		return fmt.Errorf("listen for key changes: %w", err)
	}
	changed("") // anything may have changed while nobody listened
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for key changes: %w", err)
		}
		changed(n.Payload)
	}
}
