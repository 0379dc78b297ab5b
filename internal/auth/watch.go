package auth

import (
	"context"

	"github.com/cardboxhq/cardbox/internal/pglisten"
)

// keysChannel is the Postgres notification channel that carries the id of
// a key that was revoked or deleted.
const keysChannel = "cardbox_keys"

// Watch calls changed with the id of every key that is revoked, in any
// process, until ctx ends; its caller re-checks the sessions of that key.
// While the listening connection is down notifications are lost, so after
// every (re)connection changed("") says "re-check every session". It
// returns when ctx ends.
func (k *Keys) Watch(ctx context.Context, changed func(keyID string)) error {
	pglisten.Watch(ctx, k.pool, k.log, keysChannel, changed)
	return nil
}
