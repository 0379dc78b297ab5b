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

func TestMissingBlobsAreThoseTheTenantCannotRead(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	acme, globex := s.tenant("acme"), s.tenant("globex")
	put := func(ten ident.Tenant, data string) ident.Hash {
		t.Helper()
		h := ident.Hash(blake3.Sum256([]byte(data)))
		if _, err := s.PutBlob(ctx, ten, h, []byte(data)); err != nil {
			t.Fatal(err)
		}
		return h
	}
	own := put(acme, "acme's own")
	shared := put(globex, "both store it")
	put(acme, "both store it") // a grant: acme reads it too
	globexOnly := put(globex, "globex's secret")
	never := ident.Hash(blake3.Sum256([]byte("nobody")))

	tests := []struct {
		name   string
		ten    ident.Tenant
		hashes []ident.Hash
		want   []ident.Hash
	}{
		{"none asked", acme, nil, nil},
		{"own, granted, another's, never", acme, []ident.Hash{own, shared, globexOnly, never}, []ident.Hash{globexOnly, never}},
		{"order kept, repeats kept", acme, []ident.Hash{never, own, never}, []ident.Hash{never, never}},
		{"the other tenant", globex, []ident.Hash{own, shared, globexOnly}, []ident.Hash{own}},
	}
	for _, tc := range tests {
		got, err := s.MissingBlobs(ctx, tc.ten, tc.hashes)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: missing %x, want %x", tc.name, got, tc.want)
		}
	}
	_, err := s.MissingBlobs(ctx, acme, make([]ident.Hash, MaxMissingBlobs+1))
	wantKind(t, err, fault.Invalid)
}

// MissingBlobs of bytes only another tenant stored takes the path, and
// the time, of bytes nobody stored (as TestBlobExistenceIsNoTimingOracle
// checks for GetBlob).
func TestMissingBlobsIsNoTimingOracle(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	acme, globex := s.tenant("acme"), s.tenant("globex")
	secret := []byte("acme's secret content")
	stored := ident.Hash(blake3.Sum256(secret))
	if _, err := s.PutBlob(ctx, acme, stored, secret); err != nil {
		t.Fatal(err)
	}
	never := ident.Hash(blake3.Sum256([]byte("content nobody stored")))
	ask := func(h ident.Hash) time.Duration {
		start := time.Now()
		got, err := s.MissingBlobs(ctx, globex, []ident.Hash{h})
		took := time.Since(start)
		if err != nil || len(got) != 1 {
			t.Fatalf("MissingBlobs(%x) = %x, %v; want it missing", h, got, err)
		}
		return took
	}
	const tries, warm = 600, 20
	var diffs, nevers []time.Duration
	for i := range tries + warm {
		var a, b time.Duration
		if i%2 == 0 {
			a, b = ask(stored), ask(never)
		} else {
			b, a = ask(never), ask(stored)
		}
		if i >= warm {
			diffs, nevers = append(diffs, a-b), append(nevers, b)
		}
	}
	d, mn := median(diffs), median(nevers)
	t.Logf("median of the pairs' differences %v; median check of a blob never stored %v", d, mn)
	if d > mn/10 || d < -mn/10 {
		t.Errorf("checking another tenant's blob takes %v more than one never stored (median %v): over 10 %%", d, mn)
	}
}
