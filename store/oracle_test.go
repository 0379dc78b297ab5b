package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/fault"
)

// GET_BLOB of bytes only another tenant stored takes the path of bytes
// nobody stored: the answers are alike (not found) and so is their
// speed, so a tenant cannot learn whether anyone stored a given content.
func TestBlobExistenceIsNoTimingOracle(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	acme, globex := s.tenant("acme"), s.tenant("globex")
	secret := []byte("acme's secret content")
	stored := Hash(blake3.Sum256(secret))
	if _, err := s.PutBlob(ctx, acme, stored, secret); err != nil {
		t.Fatal(err)
	}
	never := Hash(blake3.Sum256([]byte("content nobody stored")))
	// Alternating tries, paired: a slow moment of the machine (the rest
	// of the suite runs beside this test) falls on both of a pair, and the
	// median of the pairs' differences leaves it out. The first few warm
	// the connections and plans.
	const tries = 1000
	var diffs, nevers []time.Duration
	for i := range tries + 20 {
		var a, b time.Duration
		if i%2 == 0 {
			a = timeGetBlob(t, s, globex, stored)
			b = timeGetBlob(t, s, globex, never)
		} else {
			b = timeGetBlob(t, s, globex, never)
			a = timeGetBlob(t, s, globex, stored)
		}
		if i >= 20 {
			diffs, nevers = append(diffs, a-b), append(nevers, b)
		}
	}
	d, mn := median(diffs), median(nevers)
	t.Logf("median of the pairs' differences %v; median GET_BLOB of a blob never stored %v", d, mn)
	if d > mn/10 || d < -mn/10 {
		t.Errorf("GET_BLOB of another tenant's blob takes %v more than of a blob never stored (median %v): over 10 %%", d, mn)
	}
}

// timeGetBlob times one GetBlob that must answer not found.
func timeGetBlob(t *testing.T, s *testStore, tenant Tenant, h Hash) time.Duration {
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
