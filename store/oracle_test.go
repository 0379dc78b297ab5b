package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/zeebo/blake3"
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
	// Alternating tries, so that a slow moment of the machine falls on
	// both alike; the first few warm the connections and plans.
	const tries = 400
	var others, nevers []time.Duration
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
			others, nevers = append(others, a), append(nevers, b)
		}
	}
	mo, mn := median(others), median(nevers)
	t.Logf("medians: another tenant's blob %v, never stored %v", mo, mn)
	if ratio := float64(mo) / float64(mn); ratio > 1.10 || ratio < 1/1.10 {
		t.Errorf("median GET_BLOB of another tenant's blob %v, of a blob never stored %v: %.2f×, want within 10 %%", mo, mn, ratio)
	}
}

// timeGetBlob times one GetBlob that must answer not found.
func timeGetBlob(t *testing.T, s *testStore, tenant Tenant, h Hash) time.Duration {
	t.Helper()
	start := time.Now()
	_, err := s.GetBlob(context.Background(), tenant, h)
	took := time.Since(start)
	wantKind(t, err, KindNotFound)
	return took
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}
