package cxdbhttp_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
)

// TestGetBlobOverHTTPIsNoExistenceOracle: GET /v1/blobs/{hash} of bytes
// only another tenant stored is answered as of bytes nobody stored, with
// the same status and body and in the same time (docs/security.md).
// Timing as store's TestBlobExistenceIsNoTimingOracle does: alternating
// pairs, the median of their differences against the median of one
// answer, so that the rest of the suite running beside it cannot tip it.
func TestGetBlobOverHTTPIsNoExistenceOracle(t *testing.T) {
	ctx := context.Background()
	h := apitest.NewCXDBWith(t, apitest.Options{Hosted: true})
	acme := h.Client(client.WithClientMeta([]byte(`{"api_key":"` + seed.TenantKey(t, h.Keys, "acme", auth.RoleWriter) + `"}`)))
	globexKey := seed.TenantKey(t, h.Keys, "globex", auth.RoleReader)
	secret := []byte("acme's secret content")
	stored, _, err := acme.PutBlob(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	never := blake3.Sum256([]byte("content nobody stored"))

	hc := &http.Client{} // one keep-alive connection, as a scanning client would use
	t.Cleanup(hc.CloseIdleConnections)
	// ask answers GET /v1/blobs/{hash} as globex, the body with the hash
	// written as as many h's, so that the two answers compare.
	ask := func(hash [32]byte) (apitest.Response, time.Duration) {
		t.Helper()
		hexHash := hex.EncodeToString(hash[:])
		req, err := http.NewRequest(http.MethodGet, h.URL+"/v1/blobs/"+hexHash, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+globexKey)
		start := time.Now()
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.ReplaceAll(body, []byte(hexHash), bytes.Repeat([]byte("h"), len(hexHash)))
		return apitest.Response{Status: res.StatusCode, Header: res.Header, Body: body}, took
	}
	want, _ := ask(never)
	if e := want.APIError(t); want.Status != http.StatusNotFound || e.Kind != "NOT_FOUND" {
		t.Fatalf("a blob never stored: %d %s", want.Status, want.Body)
	}

	const tries, warm = 300, 20
	var diffs, nevers []time.Duration
	for i := range tries + warm {
		var a, b time.Duration
		var ra, rb apitest.Response
		if i%2 == 0 {
			ra, a = ask(stored)
			rb, b = ask(never)
		} else {
			rb, b = ask(never)
			ra, a = ask(stored)
		}
		for _, r := range []apitest.Response{ra, rb} {
			if r.Status != want.Status || !bytes.Equal(r.Body, want.Body) || r.Header.Get("Content-Type") != want.Header.Get("Content-Type") {
				t.Fatalf("try %d: answers differ: %d %s, want %d %s", i, r.Status, r.Body, want.Status, want.Body)
			}
		}
		if i >= warm {
			diffs, nevers = append(diffs, a-b), append(nevers, b)
		}
	}
	d, mn := medianDuration(diffs), medianDuration(nevers)
	t.Logf("GET /v1/blobs: median of %d pairs' differences %v; median of a blob never stored %v", tries, d, mn)
	if d > mn/10 || d < -mn/10 {
		t.Errorf("GET /v1/blobs of another tenant's blob takes %v more than of a blob never stored (median %v): over 10 %%", d, mn)
	}
	// The hash is the stored one: its owner reads it.
	if got, err := acme.GetBlob(ctx, stored); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("acme's GET_BLOB of its blob: %q, %v", got, err)
	}
}

func medianDuration(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}
