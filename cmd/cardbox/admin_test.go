package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/tenancy"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// `cardbox tenant quota NAME --bytes N` sets a tenant's storage quota
// (audited with the CLI as the actor), 0 takes it back to the server's
// default, and `cardbox tenant list` shows it.
func TestTenantQuotaCommand(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.NewPoolAndURL(t)
	keys := tenancy.New(pool, nil)
	seed.Tenants(t, keys, "acme")
	tenant := func(args ...string) (string, error) {
		return cardbox(ctx, append(append([]string{"tenant"}, args...), "--database-url", url)...)
	}
	for _, tt := range []struct {
		args []string
		err  string // in the error, if one is wanted
		want int64  // acme's own quota afterwards
		list string // in `tenant list`'s line of acme
	}{
		{[]string{"quota", "acme", "--bytes", "5000000"}, "", 5000000, " 5000000 "},
		{[]string{"quota", "acme"}, "missing --bytes", 5000000, " 5000000 "},
		{[]string{"quota", "acme", "--bytes", "-5"}, "--bytes -5: must not be negative", 5000000, " 5000000 "},
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

// A command called wrongly says what is wrong on one line and its usage
// line on the next (on stderr, exit 2), before it opens any database.
func TestAdminUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"tenant", "list", "extra"}, "cardbox tenant list: unexpected argument \"extra\"\nUsage: cardbox tenant list [flags]\n"},
		{[]string{"tenant", "delete"}, "cardbox tenant delete: missing NAME\nUsage: cardbox tenant delete NAME [flags]\n"},
		{[]string{"tenant", "rate", "acme", "--rate", "5"}, "cardbox tenant rate: --rate 5 --burst 0: give both above 0, or both 0 for the server's default\nUsage: cardbox tenant rate NAME [flags]\n"},
		{[]string{"key", "create", "extra"}, "cardbox key create: unexpected argument \"extra\"\nUsage: cardbox key create [flags]\n"},
		{[]string{"key", "create", "--tenant", "acme"}, "cardbox key create: missing --role (admin, writer, reader or analyst)\nUsage: cardbox key create [flags]\n"},
		{[]string{"key", "create", "--operator", "--tenant", "acme"}, "cardbox key create: --operator takes no --tenant, --project or --role: an operator key belongs to no tenant\nUsage: cardbox key create [flags]\n"},
		{[]string{"sql-role", "drop"}, "cardbox sql-role drop: missing --tenant or --role\nUsage: cardbox sql-role drop [flags]\n"},
		{[]string{"key"}, "cardbox key: want a command: create, list, revoke\nUsage: cardbox key COMMAND\n"},
		{[]string{"key", "rotate"}, "cardbox key: unknown command \"rotate\" (commands: create, list, revoke)\nUsage: cardbox key COMMAND\n"},
	} {
		args := append(tt.args, "--database-url", "postgres://nobody@127.0.0.1:1/none")
		if len(tt.args) < 2 || tt.args[1] == "rotate" {
			args = tt.args
		}
		stdout, stderr, code := runCLI(t, args...)
		if code != 2 || stderr != tt.want || stdout != "" {
			t.Errorf("cardbox %v: exit %d, stderr %q, stdout %q; want 2 and %q", tt.args, code, stderr, stdout, tt.want)
		}
	}
}

// `cardbox key create --operator` prints an operator key's secret once,
// and `cardbox key list` shows it with no tenant.
func TestOperatorKeys(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.NewPoolAndURL(t)
	key := func(args ...string) (string, error) {
		return cardbox(ctx, append(append([]string{"key"}, args...), "--database-url", url)...)
	}
	out, err := key("create", "--operator", "--expires", "720h")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 3 || !strings.HasPrefix(lines[0], "created operator key key_") {
		t.Fatalf("key create --operator: %q, %v", out, err)
	}
	p, err := auth.NewKeys(pool, nil).Authenticate(ctx, lines[2])
	if err != nil || p.Role != auth.RoleOperator || p.Tenant.ID != "" {
		t.Fatalf("the printed secret authenticates as %+v (%v), want an operator", p, err)
	}
	out, err = key("list")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, p.KeyID+" ") {
			row = line
		}
	}
	if fields := strings.Fields(row); len(fields) < 3 || fields[1] != "-" || fields[2] != "operator" {
		t.Errorf("key list shows the operator key as %q, want tenant - and role operator\n%s", row, out)
	}
	if _, err := key("create", "--operator", "--role", "writer"); err == nil {
		t.Error("--operator with --role: no error")
	}
	if _, err := key("create", "--tenant", "acme", "--role", "operator"); err == nil {
		t.Error("--role operator: no error")
	}
}
