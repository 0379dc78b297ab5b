package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// PublishBundle publishes the canonical conversation types, which the
// load generator's payloads declare, so that the typed view renders them.
// base is the server's HTTP URL; key, when not empty, is the API key of a
// hosted server's tenant.
func PublishBundle(ctx context.Context, client *http.Client, base, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/v1/registry/bundles/"+registry.ConversationBundleID, bytes.NewReader(registry.ConversationBundle))
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("publish bundle: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("publish bundle: %s: %s", resp.Status, body)
	}
	return nil
}
