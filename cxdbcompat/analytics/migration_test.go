package analytics_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/migrations"
)

// The analytics migration goes down and up again cleanly.
func TestMigrationDownAndUp(t *testing.T) {
	pool := pgtest.NewPool(t)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := p.DownTo(ctx, 14); err != nil { // 00015 and any after it
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname IN ('turn_data', 'analytics_lineage')").Scan(&n); err != nil || n != 0 {
		t.Fatalf("after down: %d analytics relations (%v)", n, err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
}
