// Package auth is hosted mode's who-is-calling: API keys (their secrets,
// roles and lifetimes), the principal a request acts as, and the
// administration of tenants, keys and analysts' SQL roles (sqlroles.go)
// with its audit log.
//
// A secret is "cbk_<key id>_<random>": the key id is public and names the
// row, the random part is 256 bits, and only the SHA-256 of the whole
// secret is stored. Checking a key is one primary-key lookup and a
// constant-time comparison.
package auth

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cardboxhq/cardbox/internal/ident"
)

// Role is what a key may do.
type Role string

// The roles of hosted mode.
const (
	// RoleOperator administers the service: tenants, every tenant's keys,
	// quotas, rates, usage, the audit log and /metrics. An operator key
	// belongs to no tenant and reads and writes no tenant's data.
	RoleOperator Role = "operator"
	// RoleAdmin is a tenant's administrator: its own tenant's keys, audit
	// records and usage, and its data like a writer.
	RoleAdmin Role = "admin"
	// RoleWriter reads and writes its tenant's data.
	RoleWriter Role = "writer"
	// RoleReader reads its tenant's data on every surface and writes
	// nothing.
	RoleReader Role = "reader"
	// RoleAnalyst only queries SQL; no API accepts it.
	RoleAnalyst Role = "analyst"
)

// ErrBadRole is a role name that is none of the five.
var ErrBadRole = errors.New("unknown role (operator, admin, writer, reader or analyst)")

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleOperator, RoleAdmin, RoleWriter, RoleReader, RoleAnalyst:
		return r, nil
	}
	return "", fmt.Errorf("%w: %q", ErrBadRole, s)
}

// CanRead reports whether the role may read data over the APIs.
func (r Role) CanRead() bool { return r == RoleAdmin || r == RoleWriter || r == RoleReader }

// CanWrite reports whether the role may write data over the APIs.
func (r Role) CanWrite() bool { return r == RoleAdmin || r == RoleWriter }

// CanAdminister reports whether the role may use the administration
// routes: operators for the service, admins for their own tenant.
func (r Role) CanAdminister() bool { return r == RoleOperator || r == RoleAdmin }

// Principal is who a request acts as: a key, its tenant and role. An
// operator's Tenant is the zero Tenant.
type Principal struct {
	KeyID  string
	Tenant ident.Tenant
	Role   Role
}

// Errors of authentication and authorization; the surfaces map them to
// 401 and 403.
var (
	// ErrUnauthenticated: no key, or one that is unknown, malformed,
	// revoked or expired. Its message never says which.
	ErrUnauthenticated = errors.New("a valid API key is required")
	// ErrForbidden: the key's role may not do this.
	ErrForbidden = errors.New("the API key's role does not allow this")
	// ErrNoTenant: the tenant named does not exist, or is not the key's
	// to name.
	ErrNoTenant = errors.New("no such tenant")
)

// Forbidden returns ErrForbidden with what was refused.
func Forbidden(role Role, what string) error {
	return fmt.Errorf("%w: role %s may not %s", ErrForbidden, role, what)
}

// SplitClientTag separates a binary client's tag from the key it may
// carry, for the official clients, which send no HELLO metadata: the tag
// is "<name>;key=<secret>" or the secret alone. It returns the tag to
// keep (never holding the secret) and the secret, if any.
func SplitClientTag(tag string) (clean, secret string) {
	if name, key, ok := strings.Cut(tag, ";key="); ok {
		return name, key
	}
	if strings.HasPrefix(tag, secretPrefix) {
		return "", tag
	}
	return tag, ""
}
