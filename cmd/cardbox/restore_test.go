package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/backup"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testbin"
)

// TestRestoreOntoAnotherServer backs a store with its embedded Postgres
// up under load and restores it with `cardbox restore --database-url`
// into a new database on another Postgres server, as a move to a managed
// service does: that server knows none of cardbox's roles, and the
// database's owner is an ordinary role (no superuser, no BYPASSRLS)
// named otherwise than the backup's owner, the embedded cluster's
// superuser. `cardbox verify` of the restored store is clean; a server
// started on the restored directory and database reads every turn
// acknowledged before the backup began, byte for byte, and takes
// appends; a second restore into the same database is refused in one
// line and leaves nothing behind.
func TestRestoreOntoAnotherServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real server processes and a second Postgres")
	}
	ctx := context.Background()
	bins := testbin.Build(t, "./cmd/cardboxd", "./cmd/cardbox")
	root := tempDir(t)
	dataDir, dest, restored := filepath.Join(root, "data"), filepath.Join(root, "backup"), filepath.Join(root, "restored")
	srv := startCardboxd(t, bins, dataDir)
	load := startLoad(t, srv.binAddr, 16)
	load.waitFor(t, 500)
	acked := load.ackedSoFar()
	run(t, bins, "backup", dest, "--data-dir", dataDir)
	load.stop(t)
	srv.stop(t)
	m, err := backup.ReadManifest(dest)
	if err != nil {
		t.Fatal(err)
	}

	other := pgtest.NewServer(t)
	url := other.NewOwnedDB(t, "acme_cardbox", "cardbox_restored")
	run(t, bins, "restore", dest, restored, "--database-url", url)
	if out := run(t, bins, "verify", "--data-dir", restored, "--database-url", url); !strings.Contains(out, "no defects") {
		t.Fatalf("verify of the restored store: %s", out)
	}
	again := startCardboxd(t, bins, restored, "CARDBOX_DATABASE_URL="+url)
	checkRestored(t, again.binAddr, load, acked)
	c := dialClient(t, again.binAddr)
	if _, err := c.AppendTurn(ctx, &client.AppendRequest{
		ContextID: load.contexts[0], TypeID: "test.Turn", TypeVersion: 1, Payload: []byte("after the restore"),
	}); err != nil {
		t.Fatalf("append to the restored store: %v", err)
	}
	again.stop(t)

	target := filepath.Join(root, "again")
	out, err := runErr(bins, "restore", dest, target, "--database-url", url)
	msg := strings.TrimSpace(out)
	if err == nil || !strings.Contains(msg, "already holds cardbox store "+m.StoreID) || strings.Contains(msg, "\n") {
		t.Fatalf("a restore into the restored database: %v, printed %q; want one line saying it holds store %s", err, msg, m.StoreID)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused restore left %s behind (%v)", target, err)
	}
}
