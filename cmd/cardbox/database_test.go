package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/store"
)

// A command beside a server whose store lives at a URL, run without the
// URL (the issue's `cardbox tenant create wrongdb --data-dir DATA`) or
// with another database's, refuses in one line naming both databases: no
// embedded cluster is made, no tenant created anywhere.
func TestCommandRefusesAnotherDatabase(t *testing.T) {
	t.Setenv("CARDBOX_DATABASE_URL", "")
	ctx := context.Background()
	dataDir := t.TempDir()
	url := pgtest.NewDB(t)

	// What a running cardboxd at url has made of its data directory: the
	// store, the record of its database, the lock.
	cfg := &config.Config{DataDir: dataDir, DatabaseURL: url}
	lock, err := datadir.Acquire(dataDir, "cardboxd serving (test)")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	db, err := database.Open(ctx, cfg, database.Options{NameSessions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	engine, err := store.Open(ctx, store.Options{Dir: dataDir, Pool: db.Pool})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	if err := db.RecordDatabase(dataDir); err != nil {
		t.Fatal(err)
	}

	other := pgtest.NewDB(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no URL", []string{"--data-dir", dataDir},
			[]string{"store lives in the Postgres database " + pgtest.DBName(url), "without --database-url"}},
		{"another database", []string{"--data-dir", dataDir, "--database-url", other},
			[]string{"in the Postgres database " + pgtest.DBName(url), "points at the Postgres database " + pgtest.DBName(other)}},
	} {
		out, errOut, code := runCLI(t, append([]string{"tenant", "create", "wrongdb"}, tc.args...)...)
		if code == 0 || strings.Contains(out, "created tenant") {
			t.Fatalf("%s: exit %d, printed %q", tc.name, code, out)
		}
		msg := strings.TrimSpace(errOut)
		if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, datadir.ErrOtherDatabase.Error()) {
			t.Errorf("%s: want one line saying %q, got %q", tc.name, datadir.ErrOtherDatabase, msg)
		}
		for _, want := range tc.want {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q does not say %q", tc.name, msg, want)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postgres")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an embedded cluster was made in the data directory (stat: %v)", err)
	}
	for _, u := range []string{url, other} {
		var n int
		err := pgtest.SuperuserPool(t, pgtest.DBName(u)).QueryRow(ctx, "SELECT count(*) FROM tenants WHERE tenant_id = 'wrongdb'").Scan(&n)
		if err != nil || n != 0 {
			t.Errorf("%s: tenant wrongdb rows: %d (%v)", pgtest.DBName(u), n, err)
		}
	}

	// With the server's URL it works.
	if out, err := cardbox(ctx, "tenant", "create", "rightdb", "--data-dir", dataDir, "--database-url", url); err != nil ||
		!strings.Contains(out, "created tenant rightdb") {
		t.Fatalf("with the server's URL: %q, %v", out, err)
	}
}
