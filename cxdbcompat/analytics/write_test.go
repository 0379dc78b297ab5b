package analytics

import (
	"context"
	"testing"

	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/store"
)

// A row Postgres refuses for its data keeps only its metadata; the rows
// written with it are not held back.
func TestRefusedRowKeepsMetadataOnly(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO contexts (tenant_id, context_id) VALUES ('default', 1);
		INSERT INTO turns (tenant_id, turn_id, context_id, parent_turn_id, depth, type_id, type_version, encoding,
		                   compression, uncompressed_len, payload_hash, created_at)
		VALUES ('default', 1, 1, 0, 1, 't', 1, 1, 0, 2, '\x00', now()), ('default', 2, 1, 1, 2, 't', 1, 1, 0, 2, '\x00', now())`)
	if err != nil {
		t.Fatal(err)
	}
	p := New(Options{Pool: pool})
	tenant := store.Tenant{ID: "default", No: 1}
	rows := []row{
		{job: job{tenant: tenant, turnID: 1, typeID: "t", typeVersion: 1}, Projected: Projected{Data: []byte(`{"a":1}`)}},
		{job: job{tenant: tenant, turnID: 2, typeID: "t", typeVersion: 1}, Projected: Projected{Data: []byte(`{"a":`)}},
	}
	if err := p.write(ctx, rows); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := pool.QueryRow(ctx, `SELECT string_agg(turn_id || ':' || coalesce(data::text, skipped), ' ' ORDER BY turn_id) FROM turn_data`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := `1:{"a": 1} 2:undecodable`; got != want {
		t.Errorf("turn_data %q, want %q", got, want)
	}
}
