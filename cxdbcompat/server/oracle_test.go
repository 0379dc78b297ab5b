package server_test

import (
	"bytes"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
)

// TestGetBlobIsNoExistenceOracle: on the binary port, GET_BLOB of bytes
// only another tenant stored is answered as GET_BLOB of bytes nobody
// stored, in the same frame and the same time, so that a tenant cannot
// learn whether anyone stored a given content (docs/security.md). Timing
// as store's TestBlobExistenceIsNoTimingOracle does: alternating pairs,
// the median of their differences against the median of one answer.
func TestGetBlobIsNoExistenceOracle(t *testing.T) {
	e := newEnvWith(t, envConfig{auth: apiKeys(map[string]string{"key-acme": "acme", "key-globex": "globex"})})
	e.tenant("acme")
	e.tenant("globex")
	ctx := testCtx(t)
	acme := e.dial(client.WithClientMeta([]byte(`{"api_key":"key-acme"}`)))
	secret := []byte("acme's secret content")
	stored, _, err := acme.PutBlob(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	never := hashOf([]byte("content nobody stored"))
	if stored == never {
		t.Fatal("the two hashes are one")
	}

	globex := dialRaw(t, e.addr)
	globex.expectOK(cxdbcompat.MsgHello, 0, helloWith("key-globex"))
	// ask answers GET_BLOB of h, its frame with the hash's hex written as
	// as many h's, so that the two answers compare.
	ask := func(h cxdbcompat.Hash) (cxdbcompat.Frame, time.Duration) {
		start := time.Now()
		f := globex.call(cxdbcompat.MsgGetBlob, 0, h[:])
		took := time.Since(start)
		f.Payload = bytes.ReplaceAll(f.Payload, []byte(hex.EncodeToString(h[:])), bytes.Repeat([]byte("h"), 2*len(h)))
		f.ReqID = 0
		return f, took
	}
	want, _ := ask(never)
	requireError(t, want, 404)

	const tries, warm = 300, 20
	var diffs, nevers []time.Duration
	for i := range tries + warm {
		var a, b time.Duration
		var fa, fb cxdbcompat.Frame
		if i%2 == 0 {
			fa, a = ask(stored)
			fb, b = ask(never)
		} else {
			fb, b = ask(never)
			fa, a = ask(stored)
		}
		for _, f := range []cxdbcompat.Frame{fa, fb} {
			if f.Type != want.Type || f.Flags != want.Flags || !bytes.Equal(f.Payload, want.Payload) {
				t.Fatalf("try %d: answers differ: %s, want %s", i, describe(f), describe(want))
			}
		}
		if i >= warm {
			diffs, nevers = append(diffs, a-b), append(nevers, b)
		}
	}
	d, mn := median(diffs), median(nevers)
	t.Logf("GET_BLOB: median of %d pairs' differences %v; median of a blob never stored %v", tries, d, mn)
	if d > mn/10 || d < -mn/10 {
		t.Errorf("GET_BLOB of another tenant's blob takes %v more than of a blob never stored (median %v): over 10 %%", d, mn)
	}
	// The owner still reads it: the hash is the stored one.
	if got, err := acme.GetBlob(ctx, stored); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("acme's GET_BLOB of its blob: %q, %v", got, err)
	}
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}
