package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/internal/filefault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
)

// One flipped byte in the blob pack, seen over HTTP: GET /v1/blobs/{hash}
// of the damaged blob is a 500 naming it and its damaged bytes, the turn
// pages carry a per-turn error for its turn and render the others, and
// /metrics counts the turns GET_LAST served without their payloads.
func TestDamagedBlobOverHTTPAndTheMetric(t *testing.T) {
	t.Parallel()
	const n, k = 8, 3
	ctx := context.Background()
	pool, dir := pgtest.NewPool(t), t.TempDir()
	if _, err := pool.Exec(ctx, `INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING`, ident.DefaultTenantID); err != nil {
		t.Fatal(err)
	}
	engine, err := store.Open(ctx, store.Options{Dir: dir, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	ten, err := engine.Tenant(ctx, ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	head, err := engine.CreateContext(ctx, ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var turns []store.AppendResult
	var payloads [][]byte
	for i := range n {
		payload := msgpackString(fmt.Sprintf("turn %d", i))
		r, err := engine.Append(ctx, ten, &store.AppendRequest{
			ContextID: head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3, Encoding: store.EncodingMsgpack,
			UncompressedLen: uint32(len(payload)), ContentHash: blake3.Sum256(payload), Payload: payload,
		})
		if err != nil {
			t.Fatal(err)
		}
		turns, payloads = append(turns, r), append(payloads, payload)
	}
	if err := engine.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := blobpack.Open(store.BlobDir(dir), blobpack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := p.Lookup(turns[k].ContentHash)
	p.Close()
	filefault.Flip(t, filepath.Join(store.BlobDir(dir), blobpack.PackFile), entry.Offset+12)

	h := newCXDBHarnessWith(t, harnessOptions{dir: dir, pool: pool})
	hash, span := fmt.Sprintf("%x", turns[k].ContentHash), fmt.Sprintf("bytes %d..%d of blobs.pack", entry.Offset, entry.End())

	e := h.get("/v1/blobs/"+hash).want(t, http.StatusInternalServerError).apiError(t)
	if !strings.Contains(e.Message, hash) || !strings.Contains(e.Message, span) {
		t.Fatalf("GET /v1/blobs of the damaged blob: %q, want a message naming blob %s and %s", e.Message, hash, span)
	}
	if got := h.get(fmt.Sprintf("/v1/blobs/%x", turns[k+1].ContentHash)).want(t, http.StatusOK); !bytes.Equal(got.Body, payloads[k+1]) {
		t.Fatalf("GET /v1/blobs of another blob: %q", got.Body)
	}

	var page turnsBody
	h.get(fmt.Sprintf("/v1/contexts/%d/turns?view=raw&limit=%d", head.ContextID, n)).want(t, http.StatusOK).JSON(t, &page)
	if len(page.Turns) != n {
		t.Fatalf("turn page of %d turns, want %d", len(page.Turns), n)
	}
	for i, got := range page.Turns {
		if i == k {
			if got.Error["code"] != "BLOB_UNREADABLE" || got.Error["blob"] != hash || !strings.Contains(fmt.Sprint(got.Error["message"]), span) {
				t.Fatalf("the damaged turn's error %v, want BLOB_UNREADABLE naming blob %s and %s", got.Error, hash, span)
			}
			continue
		}
		if got.Error != nil || got.BytesB64 != base64.StdEncoding.EncodeToString(payloads[i]) {
			t.Fatalf("turn %d of the page: error %v, bytes %q; want its payload", i, got.Error, got.BytesB64)
		}
	}

	served := func() float64 {
		t.Helper()
		families, err := api.NewRegistry(h.engine).Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "cardbox_damaged_turns_served_total" {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no cardbox_damaged_turns_served_total among the store's metrics")
		return 0
	}
	if n := served(); n != 0 {
		t.Fatalf("before any GET_LAST: %v damaged turns served", n)
	}
	records, err := h.client().GetLast(ctx, head.ContextID, n, true)
	if err != nil || len(records) != n || len(records[k].Payload) != 0 || records[k].ContentHash != turns[k].ContentHash {
		t.Fatalf("GET_LAST: %d records, %v; want %d, the damaged one without its payload", len(records), err, n)
	}
	if n := served(); n != 1 {
		t.Fatalf("after one GET_LAST holding the damaged turn: cardbox_damaged_turns_served_total %v, want 1", n)
	}
}

// msgpackString is s as a msgpack fixstr.
func msgpackString(s string) []byte { return append([]byte{0xa0 | byte(len(s))}, s...) }
