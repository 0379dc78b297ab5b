package store

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// TestExplainClaimQueries prints the plans and times of the release's
// queries on a tenant of 200,000 turns (1% with an fs root), for
// docs/performance.md: run with CARDBOX_EXPLAIN_CLAIMS=1 and -v.
func TestExplainClaimQueries(t *testing.T) {
	if os.Getenv("CARDBOX_EXPLAIN_CLAIMS") == "" {
		t.Skip("set CARDBOX_EXPLAIN_CLAIMS=1 to explain the release's queries on 200,000 turns")
	}
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	setup := []string{
		`INSERT INTO tenants (tenant_id) VALUES ('big'), ('other')`,
		`INSERT INTO contexts (tenant_id, context_id, head_turn_id, head_depth, created_at)
		 SELECT tn, 1, 0, 0, now() FROM unnest(ARRAY['big', 'other']) tn`,
		`INSERT INTO turns (tenant_id, turn_id, context_id, parent_turn_id, depth, type_id, type_version, encoding,
		                    compression, uncompressed_len, payload_hash, fs_root_hash, created_at)
		 SELECT tn, i, 1, 0, 1, 't', 1, 1, 0, 100, sha256((tn || i)::bytea) || sha256((tn || i)::bytea),
		        CASE WHEN i % 100 = 0 THEN sha256(('fs' || tn || i)::bytea) END, now()
		 FROM unnest(ARRAY['big', 'other']) tn, generate_series(1, 200000) i`,
		`ANALYZE turns`,
	}
	for _, q := range setup {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// hashes are n hashes to ask about, as the release sends them (a
	// parameter): half payloads of the tenant's turns, half not.
	hashes := func(n int) [][]byte {
		var out [][]byte
		err := pool.QueryRow(ctx, `SELECT array_agg(CASE WHEN i % 2 = 0 THEN sha256(('big' || i)::bytea) || sha256(('big' || i)::bytea)
		                                                ELSE sha256(('none' || i)::bytea) END)
		                           FROM generate_series(1, $1::int) i`, n).Scan(&out)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	explain := func(name, query string, args ...any) {
		t.Helper()
		rows, err := pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+query, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			if len(line) > 140 { // an array of hashes
				line = line[:140] + "…"
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s:\n%s", name, strings.Join(plan, "\n"))
	}
	for _, n := range []int{1000, 100_000} {
		h := hashes(n)
		explain(fmt.Sprintf("the former check (= ANY), %d hashes", n),
			`SELECT DISTINCT t.payload_hash FROM turns t WHERE t.tenant_id = 'big' AND t.payload_hash = ANY($1::bytea[])`, h)
		explain(fmt.Sprintf("TenantPayloadsAmong, %d hashes", n),
			`SELECT DISTINCT t.payload_hash FROM turns t WHERE t.tenant_id = 'big' AND t.payload_hash IN (SELECT unnest($1::bytea[]))`, h)
	}
	const roots = `SELECT DISTINCT fs_root_hash FROM turns WHERE tenant_id = 'big' AND fs_root_hash IS NOT NULL`
	explain("TenantFSRoots, with turns_tenant_fs_root", roots)
	if _, err := pool.Exec(ctx, `DROP INDEX turns_tenant_fs_root`); err != nil {
		t.Fatal(err)
	}
	explain("TenantFSRoots, without it", roots)
}
