package server

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/internal/auth"
)

// KeyChecker checks API keys (auth.Keys).
type KeyChecker interface {
	Authenticate(ctx context.Context, secret string) (auth.Principal, error)
}

// KeyAuthenticator authenticates a HELLO by its API key, taken from the
// client metadata JSON ({"api_key": "..."}) or, since the official clients
// send no metadata, from the client tag ("<name>;key=<secret>" or the
// secret alone). The tag is kept without its key. Reader keys get
// read-only sessions; analyst keys are refused with 403.
func KeyAuthenticator(keys KeyChecker) Authenticator {
	return func(ctx context.Context, hello cxdbcompat.HelloRequest) (Identity, error) {
		tag, secret := auth.SplitClientTag(hello.ClientTag)
		if len(hello.ClientMetaJSON) > 0 {
			var meta struct {
				APIKey string `json:"api_key"`
			}
			if json.Unmarshal(hello.ClientMetaJSON, &meta) == nil && meta.APIKey != "" {
				secret = meta.APIKey
			}
		}
		if secret == "" {
			return Identity{}, errors.New("HELLO carries no API key (client tag \"<name>;key=<secret>\" or metadata {\"api_key\": ...})")
		}
		p, err := keys.Authenticate(ctx, secret)
		if err != nil {
			return Identity{}, err
		}
		if !p.Role.CanRead() {
			return Identity{}, auth.Forbidden(p.Role, "use the binary protocol (operator keys administer the service; analyst keys are for SQL)")
		}
		return Identity{Tenant: p.Tenant, ClientTag: tag, KeyID: p.KeyID, ReadOnly: !p.Role.CanWrite()}, nil
	}
}
