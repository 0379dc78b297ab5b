package main

import (
	"context"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

// `cardbox tenant retention` sets and removes policies that `tenant list`
// shows, refusing durations that make no sense before it touches
// anything; `retention plan` says what they would delete.
func TestTenantRetention(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.NewPoolAndURL(t)
	if _, err := tenancy.New(pool, nil).CreateTenant(ctx, "test", "acme", ""); err != nil {
		t.Fatal(err)
	}
	// A context of acme's, appended to 40 days ago.
	if _, err := pool.Exec(ctx, `INSERT INTO contexts (tenant_id, context_id, created_at, updated_at)
		VALUES ('acme', nextval('context_id_seq'), now() - interval '40 days', now() - interval '40 days')`); err != nil {
		t.Fatal(err)
	}
	db := []string{"--database-url", url}
	for _, tt := range []struct {
		args     []string
		code     int
		out, err string // in stdout, stderr
	}{
		{args: []string{"tenant", "retention", "acme", "--idle", "-1h"}, code: 2, err: `--idle "-1h": must be at least 1s`},
		{args: []string{"tenant", "retention", "acme", "--max-age", "0d"}, code: 2, err: `--max-age "0d": must be at least 1s`},
		{args: []string{"tenant", "retention", "acme", "--idle", "soon"}, code: 2, err: `--idle "soon": want a duration`},
		{args: []string{"tenant", "retention", "nobody", "--idle", "1h"}, code: 1, err: "no such tenant"},
		{args: []string{"retention", "plan"}, out: "server default: none counted"},
		{args: []string{"retention", "plan"}, out: "nothing would be deleted now"},
		// The server's default, given as cardboxd takes it, counts for a
		// tenant without a policy of its own; a bad one is refused.
		{args: []string{"retention", "plan", "--retention-idle", "30d"}, out: "acme    1 "},
		{args: []string{"retention", "plan", "--retention-idle", "30d"}, out: "server default: idle 30d"},
		{args: []string{"retention", "plan", "--retention-idle", "60d"}, out: "nothing would be deleted now"},
		{args: []string{"retention", "plan", "--retention-max-age", "0"}, code: 2, err: "retention-max-age: must be at least 1s"},
		{args: []string{"tenant", "retention", "acme", "--idle", "30d"}, out: "tenant acme: all contexts are deleted once idle 30d"},
		{args: []string{"tenant", "retention", "acme", "--label", "scratch", "--idle", "1h", "--max-age", "36h"}, out: "contexts labelled scratch"},
		{args: []string{"tenant", "list"}, out: "all: idle 30d; scratch: idle 1h, older than 36h"},
		{args: []string{"retention", "plan", "--tenant", "acme"}, out: "acme    1 "},
		{args: []string{"tenant", "retention", "acme", "--label", "scratch"}, out: "tenant acme: no retention policy for contexts labelled scratch"},
		{args: []string{"tenant", "list"}, out: "all: idle 30d\n"},
		// acme's own policy (idle 30d) wins over a shorter default.
		{args: []string{"tenant", "retention", "acme", "--idle", "60d"}, out: "all contexts are deleted once idle 60d"},
		{args: []string{"retention", "plan", "--retention-idle", "1d"}, out: "nothing would be deleted now"},
	} {
		stdout, stderr, code := runCLI(t, append(tt.args, db...)...)
		if code != tt.code || !strings.Contains(stdout, tt.out) || !strings.Contains(stderr, tt.err) {
			t.Errorf("cardbox %v: exit %d, stdout %q, stderr %q; want exit %d, %q and %q", tt.args, code, stdout, stderr, tt.code, tt.out, tt.err)
		}
	}
}
