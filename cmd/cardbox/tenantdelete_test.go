package main

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
)

// runDelete runs `cardbox tenant delete` with args on the database at url.
func runDelete(url string, args ...string) (string, error) {
	return cardbox(context.Background(), append(append([]string{"tenant", "delete"}, args...), "--database-url", url)...)
}

// Without --yes the command says what would go, deletes nothing and
// fails; with it, it deletes and says what went.
func TestTenantDeleteWantsYes(t *testing.T) {
	pool, url := pgtest.NewPoolAndURL(t)
	k := tenancy.New(pool, nil)
	seed.Tenants(t, k, "acme")
	seed.Key(t, k, "acme", auth.RoleWriter)
	tests := []struct {
		args    []string
		want    string
		wantErr error
	}{
		{[]string{"acme"}, "would delete tenant acme (rows: 1)", errNotConfirmed},
		{[]string{"--yes", "acme"}, "deleted tenant acme (rows: 1)", nil},
		{[]string{"--yes", "acme"}, "", auth.ErrNoTenant},
		{[]string{"--yes", "default"}, "", tenancy.ErrDefaultTenant},
	}
	for _, tt := range tests {
		out, err := runDelete(url, tt.args...)
		if !errors.Is(err, tt.wantErr) || !strings.Contains(out, tt.want) {
			t.Errorf("delete %v: %q, %v; want %q, %v", tt.args, out, err, tt.want, tt.wantErr)
		}
		if strings.Contains(out, "rows") && !regexp.MustCompile(`(?m)^  api_keys +1$`).MatchString(out) {
			t.Errorf("delete %v: no count of api_keys in %q", tt.args, out)
		}
	}
}
