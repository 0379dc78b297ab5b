package auth

import (
	"context"
	"fmt"
	"time"
)

// Postgres notification channels. keysChannel carries the id of a key
// that was revoked or deleted, tenantsChannel the id of a tenant that was
// deleted.
const (
	keysChannel    = "cardbox_keys"
	tenantsChannel = "cardbox_tenants"
)

// Watch calls changed with the id of every key that is revoked, in any
// process, until ctx ends; its caller re-checks the sessions of that key.
// While the listening connection is down notifications are lost, so after
// every (re)connection changed("") says "re-check every session". It
// returns when ctx ends.
func (k *Keys) Watch(ctx context.Context, changed func(keyID string)) error {
	return k.watch(ctx, keysChannel, changed)
}

// WatchTenants calls deleted with the id of every tenant that is deleted,
// in any process, until ctx ends; its caller forgets the tenant. After
// every (re)connection, deleted("") says "a deletion may have been
// missed: look for every deleted tenant". It returns when ctx ends.
func (k *Keys) WatchTenants(ctx context.Context, deleted func(tenantID string)) error {
	return k.watch(ctx, tenantsChannel, deleted)
}

// watch listens on channel until ctx ends, reconnecting after failures.
func (k *Keys) watch(ctx context.Context, channel string, changed func(payload string)) error {
	for ctx.Err() == nil {
		err := k.listen(ctx, channel, changed)
		if ctx.Err() != nil {
			break
		}
		// Postgres went away: try again soon, as revocations wait on it.
		k.log.Warn("listening for changes failed; retrying", "channel", channel, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// listen holds one LISTEN connection until it fails or ctx ends.
func (k *Keys) listen(ctx context.Context, channel string, changed func(payload string)) error {
	pooled, err := k.pool.Acquire(ctx)
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
