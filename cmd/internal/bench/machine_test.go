package bench

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

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

func TestMachineBusyPercent(t *testing.T) {
	for _, tc := range []struct {
		name        string
		then, now   string
		wantPercent float64
	}{
		{"half busy, iowait is idle", "cpu 100 0 100 700 100 0 0 0 0 0", "cpu 150 0 150 750 150 0 0 0 0 0", 50},
		{"guest time not counted twice", "cpu 100 0 0 100 0 0 0 0 50 0", "cpu 200 0 0 100 0 0 0 0 150 0", 100},
		{"steal is busy", "cpu 0 0 0 100 0 0 0 0", "cpu 0 0 0 150 0 0 0 50", 50},
		{"no time passed", "cpu 1 0 0 1 0 0 0 0", "cpu 1 0 0 1 0 0 0 0", 0},
		{"not the cpu line", "intr 1 2 3 4 5 6", "intr 2 3 4 5 6 7", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseCPUTicks(tc.now).busyPercentSince(parseCPUTicks(tc.then))
			if got != tc.wantPercent {
				t.Errorf("busy = %v %%, want %v %%", got, tc.wantPercent)
			}
		})
	}
}

func TestSelfCPUCountsThisProcess(t *testing.T) {
	before := selfCPU()
	deadline := time.Now().Add(10 * time.Second)
	for x := 0; selfCPU()-before < 5*time.Millisecond; x++ {
		if time.Now().After(deadline) {
			t.Fatalf("10 s of spinning counted as %v of CPU", selfCPU()-before)
		}
		_ = x * x
	}
}
