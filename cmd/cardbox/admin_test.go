package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// stdout runs f and returns what it printed.
func stdout(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	ferr := f()
	os.Stdout = saved
	w.Close()
	return <-done, ferr
}

// `cardbox tenant quota NAME --bytes N` sets a tenant's storage quota
// (audited with the CLI as the actor), 0 takes it back to the server's
// default, and `cardbox tenant list` shows it.
func TestTenantQuotaCommand(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.NewPoolAndURL(t)
	keys := auth.NewKeys(pool, nil)
	if _, err := keys.CreateTenant(ctx, "test", "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	tenant := func(args ...string) (string, error) {
		return stdout(t, func() error {
			return adminGroup(ctx, "tenant", tenantCommands, append(args, "--database-url", url))
		})
	}
	for _, tt := range []struct {
		args []string
		err  string // in the error, if one is wanted
		want int64  // acme's own quota afterwards
		list string // in `tenant list`'s line of acme
	}{
		{[]string{"quota", "acme", "--bytes", "5000000"}, "", 5000000, " 5000000 "},
		{[]string{"quota", "acme"}, "--bytes: want", 5000000, " 5000000 "},
		{[]string{"quota", "acme", "--bytes", "-5"}, "--bytes: want", 5000000, " 5000000 "},
		{[]string{"quota", "nobody", "--bytes", "5"}, auth.ErrNoTenant.Error(), 5000000, " 5000000 "},
		{[]string{"quota", "acme", "--bytes", "0"}, "", 0, " default "},
	} {
		_, err := tenant(tt.args...)
		if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("tenant %s: %v, want an error with %q", strings.Join(tt.args, " "), err, tt.err)
		}
		q, err := keys.TenantQuota(ctx, "acme")
		if err != nil || q.Bytes != tt.want {
			t.Errorf("after tenant %s: quota %d (%v), want %d", strings.Join(tt.args, " "), q.Bytes, err, tt.want)
		}
		out, err := tenant("list")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "acme ") && !strings.Contains(line, tt.list) {
				t.Errorf("after tenant %s, tenant list says %q, want %q in it", strings.Join(tt.args, " "), line, tt.list)
			}
		}
	}
	entries, err := keys.Audit(ctx, "acme", 10)
	if err != nil {
		t.Fatal(err)
	}
	var quotas int
	for _, e := range entries {
		if e.Action == "tenant.quota" {
			quotas++
			if !strings.HasPrefix(e.Actor, "cli:") {
				t.Errorf("audited actor %q, want the CLI's", e.Actor)
			}
		}
	}
	if quotas != 2 {
		t.Errorf("%d tenant.quota records, want 2", quotas)
	}
	if _, err := tenant("quota", "acme", "--bytes", "x"); err == nil || errors.Is(err, auth.ErrNoTenant) {
		t.Errorf("--bytes x: %v", err)
	}
}

// A command given the wrong number of arguments says how to call it,
// naming it once, before it opens any database.
func TestAdminUsageNamesTheCommandOnce(t *testing.T) {
	for _, tc := range []struct {
		group string
		cmds  map[string]adminCommand
		args  []string
		want  string
	}{
		{"tenant", tenantCommands, []string{"list", "extra"}, "usage: cardbox tenant list"},
		{"tenant", tenantCommands, []string{"delete"}, "usage: cardbox tenant delete NAME --yes"},
		{"key", keyCommands, []string{"create", "extra"}, "usage: cardbox key create --tenant NAME --role ROLE [--project ID] [--expires 720h]"},
		{"sql-role", sqlRoleCommands, []string{"drop", "extra"}, "usage: cardbox sql-role drop --tenant NAME | --role ROLE"},
	} {
		err := adminGroup(context.Background(), tc.group, tc.cmds, append(tc.args, "--database-url", "postgres://nobody@127.0.0.1:1/none"))
		if err == nil || err.Error() != tc.want {
			t.Errorf("cardbox %s %v: %v, want %q", tc.group, tc.args, err, tc.want)
		}
	}
}
