package sdk

import (
	"context"
	"fmt"
)

// Bundle is a registry bundle to publish: its id and its JSON bytes.
type Bundle struct {
	ID   string
	JSON []byte
}

// PublishBundles publishes bundles in order, as a runtime does at
// start-up before its first append. It is idempotent: bundles already
// published with the same bytes succeed again, so every start may call
// it. A bundle id already published with other bytes is ErrConflict: bump
// the bundle id (and the type versions) when a schema changes.
func PublishBundles(ctx context.Context, r Reader, bundles ...Bundle) error {
	for _, b := range bundles {
		if err := r.PublishBundle(ctx, b.ID, b.JSON); err != nil {
			return fmt.Errorf("publish bundles at start-up: %w", err)
		}
	}
	return nil
}
