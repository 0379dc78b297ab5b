package auth_test

import (
	"errors"
	"testing"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/ident"
)

func TestScope(t *testing.T) {
	operator := auth.Principal{KeyID: "key_1", Role: auth.RoleOperator}
	acmeAdmin := auth.Principal{KeyID: "key_2", Role: auth.RoleAdmin, Tenant: ident.Tenant{ID: "acme"}}
	for _, c := range []struct {
		name    string
		p       auth.Principal
		named   string
		want    string
		wantErr error
	}{
		{"operator, no tenant named: every tenant", operator, "", "", nil},
		{"operator names a tenant", operator, "globex", "globex", nil},
		{"admin, no tenant named: its own", acmeAdmin, "", "acme", nil},
		{"admin names its own", acmeAdmin, "acme", "acme", nil},
		{"admin names another: as a missing one", acmeAdmin, "globex", "", auth.ErrNoTenant},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := auth.ScopeOf(c.p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Tenant(c.named)
			if got != c.want || !errors.Is(err, c.wantErr) {
				t.Errorf("Tenant(%q) = %q, %v; want %q, %v", c.named, got, err, c.want, c.wantErr)
			}
		})
	}
	for _, role := range []auth.Role{auth.RoleWriter, auth.RoleReader, auth.RoleAnalyst} {
		if _, err := auth.ScopeOf(auth.Principal{Role: role, Tenant: ident.Tenant{ID: "acme"}}); !errors.Is(err, auth.ErrForbidden) {
			t.Errorf("scope of a %s key: %v, want ErrForbidden", role, err)
		}
	}
	s, _ := auth.ScopeOf(acmeAdmin)
	if err := s.Operate("create tenants"); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("an admin creates tenants: %v, want ErrForbidden", err)
	}
	if err := s.CreatesRole(auth.RoleOperator); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("an admin creates an operator key: %v, want ErrForbidden", err)
	}
	if err := s.CreatesRole(auth.RoleWriter); err != nil {
		t.Errorf("an admin creates a writer key: %v", err)
	}
}
