package auth

import "fmt"

// Scope is what an administering key reaches: every tenant for an
// operator, its own tenant alone for a tenant's admin. A tenant outside
// the scope is reported exactly as a missing one (ErrNoTenant, ErrNoKey),
// so that a tenant's admin learns nothing of other tenants; what only an
// operator may do is ErrForbidden whatever it names.
type Scope struct {
	// tenant is the admin's own tenant; "" for an operator.
	tenant string
}

// Everything is an operator's scope: the CLI's, and an operator key's.
var Everything = Scope{}

// ScopeOf returns the scope of p: ErrForbidden unless p is an operator
// or a tenant's admin.
func ScopeOf(p Principal) (Scope, error) {
	switch p.Role {
	case RoleOperator:
		return Everything, nil
	case RoleAdmin:
		return Scope{tenant: p.Tenant.ID}, nil
	}
	return Scope{}, Forbidden(p.Role, "administer")
}

// Operator reports whether the scope is every tenant.
func (s Scope) Operator() bool { return s.tenant == "" }

// Own is the tenant of a tenant admin's scope; "" for an operator.
func (s Scope) Own() string { return s.tenant }

// Tenant checks the tenant a request names against the scope and returns
// the one to act on: "" names the scope's own tenant (every tenant for an
// operator); another tenant than a tenant admin's own is ErrNoTenant.
func (s Scope) Tenant(named string) (string, error) {
	if named == "" {
		return s.tenant, nil
	}
	if !s.Operator() && named != s.tenant {
		return "", fmt.Errorf("tenant %q: %w", named, ErrNoTenant)
	}
	return named, nil
}

// Operate is nil for an operator and ErrForbidden for a tenant's admin,
// for what only operators may do (what names no tenant, or changes one's
// existence, quota or rate).
func (s Scope) Operate(what string) error {
	if s.Operator() {
		return nil
	}
	return Forbidden(RoleAdmin, what+" (operator keys only)")
}

// CreatesRole checks that the scope may create a key of role: a tenant's
// admin never creates an operator key.
func (s Scope) CreatesRole(role Role) error {
	if role == RoleOperator {
		return s.Operate("create operator keys")
	}
	return nil
}
