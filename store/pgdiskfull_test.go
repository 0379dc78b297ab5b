package store

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// A real full disk under Postgres: the turns table lives on a small
// tmpfs, which the test fills. An append is refused with fault.DiskFull
// (was: internal), the store keeps serving, and appends succeed again
// once space is freed.
func TestPostgresFullDiskIsDiskFullAndHeals(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDB(t)
	dir := pgtest.SmallDisk(t, pgtest.DBName(url), 4<<20, "turns")
	e := openOn(t, t.TempDir(), url)
	ctx := context.Background()
	ten, err := e.Tenant(ctx, ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.CreateContext(ctx, ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	free := pgtest.FillDisk(t, dir)
	var full error
	for i := 0; full == nil; i++ {
		if i > 10_000 {
			t.Fatal("Postgres's disk never filled up")
		}
		_, full = e.Append(ctx, ten, turnReq(h.ContextID, 0, payloadN(i)))
	}
	wantKind(t, full, fault.DiskFull)
	var pgErr *pgconn.PgError
	if !errors.As(full, &pgErr) || pgErr.Code != "53100" {
		t.Fatalf("the refusal's cause: %v, want SQLSTATE 53100 from Postgres", full)
	}
	if err := e.Healthy(ctx); err != nil {
		t.Fatalf("the store stopped on Postgres's full disk: %v", err)
	}
	free()
	if _, err := e.Append(ctx, ten, turnReq(h.ContextID, 0, payloadN(1_000_000))); err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
}
