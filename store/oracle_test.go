package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// GET_BLOB of bytes only another tenant stored takes the path of bytes
// nobody stored: the answers are alike (not found) and so is their
// speed, so a tenant cannot learn whether anyone stored a given content.
func TestBlobExistenceIsNoTimingOracle(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	acme, globex := s.tenant("acme"), s.tenant("globex")
	secret := []byte("acme's secret content")
	stored := ident.Hash(blake3.Sum256(secret))
	if _, err := s.PutBlob(ctx, acme, stored, secret); err != nil {
		t.Fatal(err)
	}
	never := ident.Hash(blake3.Sum256([]byte("content nobody stored")))
	checkNoTimingOracle(t, s.Engine, globex, stored, never, "another tenant's blob")
}

// A blob the pack lost with its index entry, which a committed turn of
// the default tenant names: to another tenant it is as not found, as
// fast, as one never stored.
func TestLostBlobExistenceIsNoTimingOracle(t *testing.T) {
	const k = 100
	s, _, _, other := newLostStore(t, k)
	never := ident.Hash(blake3.Sum256([]byte("content nobody stored")))
	checkNoTimingOracle(t, s.Engine, other, s.turns[k].ContentHash, never, "another tenant's lost blob")
}

// checkNoTimingOracle fails unless GET_BLOB by tenant of blob a, which the
// tenant does not have, takes as long as of blob never, which nobody
// stored: both are not found.
func checkNoTimingOracle(t *testing.T, s *Engine, tenant ident.Tenant, a, never ident.Hash, what string) {
	t.Helper()
	// Alternating tries, paired: a slow moment of the machine (the rest
	// of the suite runs beside this test) falls on both of a pair, and the
	// median of the pairs' differences leaves it out. The first few warm
	// the connections and plans.
	const tries = 1000
	var diffs, nevers []time.Duration
	for i := range tries + 20 {
		var da, db time.Duration
		if i%2 == 0 {
			da = timeGetBlob(t, s, tenant, a)
			db = timeGetBlob(t, s, tenant, never)
		} else {
			db = timeGetBlob(t, s, tenant, never)
			da = timeGetBlob(t, s, tenant, a)
		}
		if i >= 20 {
			diffs, nevers = append(diffs, da-db), append(nevers, db)
		}
	}
	d, mn := median(diffs), median(nevers)
	t.Logf("median of the pairs' differences %v; median GET_BLOB of a blob never stored %v", d, mn)
	if d > mn/10 || d < -mn/10 {
		t.Errorf("GET_BLOB of %s takes %v more than of a blob never stored (median %v): over 10 %%", what, d, mn)
	}
}

// timeGetBlob times one GetBlob that must answer not found.
func timeGetBlob(t *testing.T, s *Engine, tenant ident.Tenant, h ident.Hash) time.Duration {
	t.Helper()
	start := time.Now()
	_, err := s.GetBlob(context.Background(), tenant, h)
	took := time.Since(start)
	wantKind(t, err, fault.NotFound)
	return took
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}
