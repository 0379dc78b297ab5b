package migrations_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/migrations"
)

// Keys written before 00061 (under the btree it drops) are found after it
// by the hash index on context and key, as the turn store asks
// (ListIdempotencyKeys); the same key in another context is not; down and
// up again keep them.
func TestIdempotencyKeysFoundAcrossHashIndex(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 60); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO idempotency_keys (tenant_id, context_id, idempotency_key, turn_id, created_at, requested_parent_turn_id)
		VALUES ('acme', 7, 'k-1', 70, now(), 69), ('acme', 8, 'k-1', 80, now(), NULL),
		       ('acme', 7, 'k-2', 71, now() - interval '2 days', NULL)`); err != nil {
		t.Fatal(err)
	}
	// Keys of other contexts, so that the planner weighs the indexes as on
	// a store in use.
	if _, err := pool.Exec(ctx, `
		INSERT INTO idempotency_keys (tenant_id, context_id, idempotency_key, turn_id, created_at)
		SELECT 'acme', 100 + g % 50, convert_to('other-' || g, 'UTF8'), 1000 + g, now() FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	lookup := func(step string) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		const q = `
			SELECT k.context_id, k.turn_id
			FROM (SELECT unnest($1::bigint[]) AS context_id, unnest($2::bytea[]) AS idempotency_key) w
			JOIN idempotency_keys k ON int8send(k.context_id) || k.idempotency_key = int8send(w.context_id) || w.idempotency_key
			                       AND k.context_id = w.context_id AND k.idempotency_key = w.idempotency_key
			WHERE k.tenant_id = 'acme' AND k.created_at > now() - interval '1 day'
			ORDER BY k.context_id`
		rows, err := tx.Query(ctx, q, []int64{7, 7, 9}, [][]byte{[]byte("k-1"), []byte("k-2"), []byte("k-1")})
		if err != nil {
			t.Fatal(err)
		}
		var got [][2]int64
		for rows.Next() {
			var c, turn int64
			if err := rows.Scan(&c, &turn); err != nil {
				t.Fatal(err)
			}
			got = append(got, [2]int64{c, turn})
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != [2]int64{7, 70} {
			t.Errorf("%s: keys found %v, want only context 7's k-1 (turn 70)", step, got)
		}
		var all []byte
		r2, err := tx.Query(ctx, "EXPLAIN (COSTS OFF) "+q, []int64{7}, [][]byte{[]byte("k-1")})
		if err != nil {
			t.Fatal(err)
		}
		for r2.Next() {
			var line string
			if err := r2.Scan(&line); err != nil {
				t.Fatal(err)
			}
			all = append(all, line...)
			all = append(all, '\n')
		}
		if err := r2.Err(); err != nil {
			t.Fatal(err)
		}
		if want := "idempotency_keys_context_key"; !strings.Contains(string(all), want) {
			t.Errorf("%s: the lookup does not use %s:\n%s", step, want, all)
		}
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE idempotency_keys"); err != nil {
		t.Fatal(err)
	}
	lookup("after 00061")
	if _, err := p.DownTo(ctx, 60); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	lookup("after 00061 down and up again")
}
