package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/tenancy"
)

func TestPsqlArgv(t *testing.T) {
	for _, tt := range []struct {
		passed []string
		want   []string
	}{
		{nil, []string{"psql", "--dbname=host=h port=1"}},
		{[]string{"-c", "SELECT 1"}, []string{"psql", "--dbname=host=h port=1", "-c", "SELECT 1"}},
		{[]string{"-f", "report.sql", "--csv"}, []string{"psql", "--dbname=host=h port=1", "-f", "report.sql", "--csv"}},
	} {
		if got := psqlArgv("host=h port=1", tt.passed); !slices.Equal(got, tt.want) {
			t.Errorf("psqlArgv(%q) = %q, want %q", tt.passed, got, tt.want)
		}
	}
}

// runningServer starts the embedded Postgres of a data directory with an
// analysts' listener, holding the directory's lock as cardboxd does, and
// creates tenant acme with an analyst role. It returns the directory, the
// listener's address ("" without listen) and the role's password.
func runningServer(t *testing.T, listen bool) (dir, sqlAddr, password string) {
	t.Helper()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "cardbox-sql-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // postgres may run as another user
		t.Fatal(err)
	}
	lock, err := datadir.Acquire(dir, "cardboxd serving (test)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Unlock() })
	if listen {
		sqlAddr = freeAddr(t)
	}
	db, err := database.Open(ctx, &config.Config{DataDir: dir, SQLAddr: sqlAddr}, database.Options{Owner: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	_, _, password, err = tenancy.New(db.Pool, nil).CreateTenantWithSQLRole(ctx, "test", "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	return dir, sqlAddr, password
}

// `cardbox sql` finds a running server's analysts' listener in its data
// directory, and hands the arguments after -- to psql: the real psql
// answers the query as the tenant's role.
func TestSQLFindsTheListenerAndPassesArguments(t *testing.T) {
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Skip("no psql installed")
	}
	dir, sqlAddr, password := runningServer(t, true)
	t.Setenv("CARDBOX_DATA_DIR", dir)
	t.Setenv("CARDBOX_SQL_ADDR", "") // as if unset: found in the data directory

	out, err := cardbox(context.Background(), "sql", "--tenant", "acme", "--print")
	if err != nil || !strings.Contains(out, "port="+sqlAddr[strings.LastIndex(sqlAddr, ":")+1:]) || !strings.Contains(out, "user=cardbox_sql_acme") {
		t.Fatalf("cardbox sql --print: %q, %v; want the listener %s", out, err, sqlAddr)
	}

	var argv []string
	root := &cli.Command{Name: "cardbox", Purpose: "test", Subs: []*cli.Command{sqlCommand(func(a []string) error { argv = a; return nil })}}
	err = cli.Run(context.Background(), root, []string{"sql", "--tenant", "acme", "--", "-tA", "-c", "SELECT current_user, count(*) FROM turns"}, os.Stdout, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if len(argv) != 5 || !slices.Equal(argv[2:], []string{"-tA", "-c", "SELECT current_user, count(*) FROM turns"}) {
		t.Fatalf("psql argv %q", argv)
	}
	cmd := exec.Command(psql, argv[1:]...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password)
	got, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "cardbox_sql_acme|0" {
		t.Errorf("psql %q: %q, %v", argv[1:], got, err)
	}
}

// Without a listener for analysts (the server runs without --sql-addr,
// or with an external Postgres) cardbox sql says what to do, before
// running anything.
func TestSQLWithoutAListener(t *testing.T) {
	ctx := context.Background()
	_, err := cardbox(ctx, "sql", "--tenant", "acme", "--print", "--database-url", "postgres://nobody@127.0.0.1:1/none")
	var usage *cli.UsageError
	if !errors.As(err, &usage) || !strings.HasPrefix(usage.Msg, "--database-url: cardbox sql connects to the embedded Postgres") {
		t.Errorf("with --database-url: %v", err)
	}
	_, err = cardbox(ctx, "sql", "--tenant", "acme", "--print", "--data-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no cardboxd runs on") {
		t.Errorf("without a server: %v", err)
	}
	dir, _, _ := runningServer(t, false)
	_, err = cardbox(ctx, "sql", "--tenant", "acme", "--print", "--data-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "no SQL listener") || !strings.Contains(err.Error(), "--sql-addr") {
		t.Errorf("beside a server without --sql-addr: %v", err)
	}
}
