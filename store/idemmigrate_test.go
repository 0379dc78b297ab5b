package store

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/cardboxhq/cardbox/migrations"
)

// Keys written under the index migration 00061 replaced (the btree on
// tenant, context and key) are answered as replays after it, from
// Postgres by its hash index when memory does not hold them (a restart
// loads only the newest), and from memory when it does.
func TestKeysWrittenBeforeTheHashIndexReplayAfterIt(t *testing.T) {
	const bound, n = 2, 6
	ctx := context.Background()
	s := newTestStore(t)
	s.maxIdemKeys = bound
	db := stdlib.OpenDBFromPool(s.pool)
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 60); err != nil {
		t.Fatal(err)
	}
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	reqs := make([]*AppendRequest, n)
	first := make([]AppendResult, n)
	for i := range reqs {
		reqs[i] = turnReq(h.ContextID, 0, payloadN(i))
		reqs[i].IdempotencyKey = []byte("before-00061-" + strconv.Itoa(i))
		first[i] = s.append(ten, reqs[i])
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	s.reopen()
	for i, req := range reqs {
		if r := s.append(ten, req); r.TurnID != first[i].TurnID || !r.Replayed {
			t.Fatalf("retry of key %d after the migration = %+v, want turn %d replayed", i, r, first[i].TurnID)
		}
	}
	if asked := s.keyLookups.asked.Load(); asked < n-bound {
		t.Errorf("%d keys asked of Postgres, want at least the %d memory does not hold", asked, n-bound)
	}
	if turns, keys := s.countRows("turns"), s.countRows("idempotency_keys"); turns != n || keys != n {
		t.Fatalf("turn rows %d, key rows %d after the retries; want %d each", turns, keys, n)
	}
}
