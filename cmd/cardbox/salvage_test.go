package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
	"github.com/cardboxhq/cardbox/store"
)

// Offline commands refuse a data directory a server owns, naming it, and
// touch nothing (they fail before connecting anywhere).
func TestOfflineCommandsRefuseALockedDataDirectory(t *testing.T) {
	dir := t.TempDir()
	lock, err := datadir.Acquire(dir, "cardboxd serving 127.0.0.1:9009")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	args := []string{"--data-dir", dir, "--database-url", "postgres://nobody@127.0.0.1:1/none"}
	for _, name := range []string{"verify", "recover", "migrate"} {
		_, err := cardbox(context.Background(), append([]string{name}, args...)...)
		if !errors.Is(err, datadir.ErrLocked) || !strings.Contains(err.Error(), "cardboxd serving 127.0.0.1:9009") {
			t.Errorf("%s beside a server: %v, want a refusal naming it", name, err)
		}
	}
}

// `cardbox verify` and `cardbox recover` work as the CLI runs them: on a
// pool whose login has no privileges of its own (pgrole.Server), beside a
// deleted tenant's records, which are not damage.
func TestVerifyAndRecoverAsTheCLIRunsThem(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.NewPoolAndURL(t)
	dir := t.TempDir()
	writeTurns(t, pool, dir, "acme", "bravo")
	if err := pgtest.BeginDeletion(t, pool, "acme").Finish(); err != nil {
		t.Fatal(err)
	}
	args := []string{"--data-dir", dir, "--database-url", url}
	for _, name := range []string{"verify", "recover"} {
		if _, err := cardbox(ctx, append([]string{name}, args...)...); err != nil {
			t.Errorf("cardbox %s: %v", name, err)
		}
	}
}

// writeTurns appends a turn for each tenant (created if need be) and
// closes the store.
func writeTurns(t *testing.T, pool *pgxpool.Pool, dir string, tenants ...string) {
	t.Helper()
	ctx := context.Background()
	engine, err := store.Open(ctx, store.Options{Dir: dir, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	for _, id := range tenants {
		tenant := seed.StoreTenant(t, pool, engine, id)
		head, err := engine.CreateContext(ctx, tenant, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		payload := []byte("a turn of " + id)
		_, err = engine.Append(ctx, tenant, &store.AppendRequest{ContextID: head.ContextID, TypeID: "app.Note", TypeVersion: 1,
			Encoding: 1, UncompressedLen: uint32(len(payload)), ContentHash: ident.HashOf(payload), Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
	}
}
