package server

import (
	"context"
	"errors"

	"github.com/cardboxhq/cardbox/internal/auth"
)

// KeyChecker checks API keys (auth.Keys).
type KeyChecker interface {
	Authenticate(ctx context.Context, secret string) (auth.Principal, error)
}

// KeyAuthenticator authenticates a HELLO by its API key (Credential.Secret).
// Reader keys get read-only sessions; analyst keys are refused with 403.
func KeyAuthenticator(keys KeyChecker) Authenticator {
	return func(ctx context.Context, cred Credential) (Grant, error) {
		if cred.Secret == "" {
			return Grant{}, errors.New("HELLO carries no API key (client tag \"<name>;key=<secret>\" or metadata {\"api_key\": ...})")
		}
		p, err := keys.Authenticate(ctx, cred.Secret)
		if err != nil {
			return Grant{}, err
		}
		if !p.Role.CanRead() {
			return Grant{}, auth.Forbidden(p.Role, "use the binary protocol (operator keys administer the service; analyst keys are for SQL)")
		}
		return Grant{TenantID: p.Tenant.ID, KeyID: p.KeyID, ReadOnly: !p.Role.CanWrite()}, nil
	}
}
