package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// TestFloorStatementWritesWAL checks that the floor's transaction writes
// WAL before its commit record, which is what makes Postgres wait for the
// flush at COMMIT; a transaction that only takes an id (txid_current)
// writes none, and its commit does not wait. EXPLAIN's WAL counters are
// this backend's own, so other sessions' writes do not blur them.
func TestFloorStatementWritesWAL(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	for _, tt := range []struct {
		sql       string
		writesWAL bool
	}{
		{floorStatement, true},
		{"SELECT txid_current()", false},
	} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var plan []byte
		err = tx.QueryRow(ctx, "EXPLAIN (ANALYZE, WAL, FORMAT JSON) "+tt.sql).Scan(&plan)
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tt.sql, err)
		}
		var out []struct {
			Plan struct {
				WALRecords int64 `json:"WAL Records"`
			} `json:"Plan"`
		}
		if err := json.Unmarshal(plan, &out); err != nil || len(out) != 1 {
			t.Fatalf("%s: EXPLAIN output %s: %v", tt.sql, plan, err)
		}
		if wrote := out[0].Plan.WALRecords > 0; wrote != tt.writesWAL {
			t.Errorf("%s: %d WAL records; want WAL written: %v", tt.sql, out[0].Plan.WALRecords, tt.writesWAL)
		}
	}
}
