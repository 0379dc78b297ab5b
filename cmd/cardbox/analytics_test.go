package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cmd/internal/cli"
	"github.com/cardboxhq/cardbox/cxdbcompat/analytics"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	sqlcdb "github.com/cardboxhq/cardbox/sqlc/db"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/metastore"
)

// `cardbox analytics backfill` re-projects, offline, turns written before
// their bundle was published.
func TestAnalyticsBackfillCommand(t *testing.T) {
	ctx := context.Background()
	pool, url := pgtest.NewPoolAndURL(t)
	dir := t.TempDir()
	writeUnknownTurns(t, pool, dir, 3)
	if _, err := cardbox(ctx, "analytics", "backfill", "--data-dir", dir, "--database-url", url); err != nil {
		t.Fatal(err)
	}
	var typed int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM turn_data WHERE data->>'item_type' = 'user_input'").Scan(&typed); err != nil || typed != 3 {
		t.Errorf("%d typed rows after the backfill (%v), want 3", typed, err)
	}
}

// writeUnknownTurns appends n turns before the conversation bundle is
// published, projects them (as of an unknown type), publishes the bundle
// with no projector running, and closes the store.
func writeUnknownTurns(t *testing.T, pool *pgxpool.Pool, dir string, n int) {
	t.Helper()
	ctx := context.Background()
	engine, err := store.Open(ctx, store.Options{Dir: dir, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	svc := service.New(engine, metastore.New(pool, 0, engine), service.Options{})
	tenant, err := engine.Tenant(ctx, ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	head, err := svc.CreateContext(ctx, tenant, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	w := &sampleWriter{}
	for i := range n {
		item := userInput("question " + string(rune('a'+i)))
		payload, err := w.encode(item)
		if err != nil {
			t.Fatal(err)
		}
		_, err = svc.Append(ctx, tenant, &store.AppendRequest{ContextID: head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3,
			Encoding: 1, UncompressedLen: uint32(len(payload)), ContentHash: ident.HashOf(payload), Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := analytics.New(analytics.Options{Source: svc, Pool: pool}).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	var unknown int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM turn_data WHERE skipped = 'unknown_type'").Scan(&unknown); err != nil || unknown != n {
		t.Fatalf("%d unknown_type rows (%v), want %d", unknown, err, n)
	}
	if _, err := svc.PublishBundle(ctx, tenant, "", registry.ConversationBundle); err != nil {
		t.Fatal(err)
	}
}

// Beside a running server the command follows the server's backfills
// until none is left.
func TestFollowBackfills(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(ctx, "INSERT INTO analytics_backfills (tenant_id, generation) VALUES ('default', 1)"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- followBackfills(ctx, sqlcdb.New(pgrole.As(pool, pgrole.Projector, "")), 10*time.Millisecond, cli.NewProgress(io.Discard))
	}()
	select {
	case err := <-done:
		t.Fatalf("returned while a backfill runs: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := pool.Exec(ctx, "UPDATE analytics_backfills SET done_at = now()"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still following after the backfill finished")
	}
}
