package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// runDelete runs `cardbox tenant delete` with args against k.
func runDelete(k *auth.Keys, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := tenantDelete(&out)
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cmd.flags(fs)
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	err := cmd.run(context.Background(), k, "cli:test", fs.Args())
	return out.String(), err
}

// Without --yes the command says what would go, deletes nothing and
// fails; with it, it deletes and says what went.
func TestTenantDeleteWantsYes(t *testing.T) {
	ctx := context.Background()
	k := auth.NewKeys(pgtest.NewPool(t), nil)
	if _, err := k.CreateTenant(ctx, "test", "acme", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := k.CreateKey(ctx, "test", "acme", auth.RoleWriter, nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args    []string
		want    string
		wantErr error
	}{
		{[]string{"acme"}, "would delete tenant acme (rows: 1)", errNotConfirmed},
		{[]string{"--yes", "acme"}, "deleted tenant acme (rows: 1)", nil},
		{[]string{"--yes", "acme"}, "", auth.ErrNoTenant},
		{[]string{"--yes", "default"}, "", auth.ErrDefaultTenant},
	}
	for _, tt := range tests {
		out, err := runDelete(k, tt.args...)
		if !errors.Is(err, tt.wantErr) || !strings.Contains(out, tt.want) {
			t.Errorf("delete %v: %q, %v; want %q, %v", tt.args, out, err, tt.want, tt.wantErr)
		}
		if strings.Contains(out, "rows") && !regexp.MustCompile(`(?m)^  api_keys +1$`).MatchString(out) {
			t.Errorf("delete %v: no count of api_keys in %q", tt.args, out)
		}
	}
}
