package cxdbhttp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/internal/filefault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
	"github.com/cardboxhq/cardbox/internal/waitfor"
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
	d := newTurnsStore(t, n)
	pool, dir, head, turns, payloads := d.pool, d.dir, d.head, d.turns, d.payloads
	entry := d.entry(t, k)
	filefault.Flip(t, filepath.Join(store.BlobDir(dir), blobpack.PackFile), entry.Offset+12)

	h := apitest.NewCXDBWith(t, apitest.Options{Dir: dir, Pool: pool})
	hash, span := fmt.Sprintf("%x", turns[k].ContentHash), fmt.Sprintf("bytes %d..%d of blobs.pack", entry.Offset, entry.End())

	e := h.Get("/v1/blobs/"+hash).Want(t, http.StatusInternalServerError).APIError(t)
	if !strings.Contains(e.Message, hash) || !strings.Contains(e.Message, span) {
		t.Fatalf("GET /v1/blobs of the damaged blob: %q, want a message naming blob %s and %s", e.Message, hash, span)
	}
	if got := h.Get(fmt.Sprintf("/v1/blobs/%x", turns[k+1].ContentHash)).Want(t, http.StatusOK); !bytes.Equal(got.Body, payloads[k+1]) {
		t.Fatalf("GET /v1/blobs of another blob: %q", got.Body)
	}

	var page turnsBody
	h.Get(fmt.Sprintf("/v1/contexts/%d/turns?view=raw&limit=%d", head.ContextID, n)).Want(t, http.StatusOK).JSON(t, &page)
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
		families, err := api.NewRegistry(h.Engine).Gather()
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
	records, err := h.Client().GetLast(ctx, head.ContextID, n, true)
	if err != nil || len(records) != n || len(records[k].Payload) != 0 || records[k].ContentHash != turns[k].ContentHash {
		t.Fatalf("GET_LAST: %d records, %v; want %d, the damaged one without its payload", len(records), err, n)
	}
	if n := served(); n != 1 {
		t.Fatalf("after one GET_LAST holding the damaged turn: cardbox_damaged_turns_served_total %v, want 1", n)
	}
}

// turnsStore is a closed store of one context's turns.
type turnsStore struct {
	pool     *pgxpool.Pool
	dir      string
	head     store.Head
	turns    []store.AppendResult
	payloads [][]byte
}

// newTurnsStore appends n turns to a new context of a new store, and
// closes it.
func newTurnsStore(t *testing.T, n int) *turnsStore {
	t.Helper()
	ctx := context.Background()
	d := &turnsStore{pool: pgtest.NewPool(t), dir: t.TempDir()}
	engine, err := store.Open(ctx, store.Options{Dir: d.dir, Pool: d.pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	ten := seed.StoreTenant(t, d.pool, engine, ident.DefaultTenantID)
	if d.head, err = engine.CreateContext(ctx, ten, 0, ""); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		payload := msgpackString(fmt.Sprintf("turn %d", i))
		r, err := engine.Append(ctx, ten, &store.AppendRequest{
			ContextID: d.head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3, Encoding: store.EncodingMsgpack,
			UncompressedLen: uint32(len(payload)), ContentHash: blake3.Sum256(payload), Payload: payload,
		})
		if err != nil {
			t.Fatal(err)
		}
		d.turns, d.payloads = append(d.turns, r), append(d.payloads, payload)
	}
	if err := engine.Close(); err != nil {
		t.Fatal(err)
	}
	return d
}

// entry is the pack entry of turn k's payload; the store must be closed.
func (d *turnsStore) entry(t *testing.T, k int) blobpack.Entry {
	t.Helper()
	p, err := blobpack.Open(store.BlobDir(d.dir), blobpack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	e, ok := p.Lookup(d.turns[k].ContentHash)
	if !ok {
		t.Fatalf("turn %d's payload is not in the pack", k)
	}
	return e
}

// packHolesGauge is cardbox_blob_pack_holes as /metrics shows it.
func packHolesGauge(t *testing.T, engine *store.Engine) float64 {
	t.Helper()
	families, err := api.NewRegistry(engine).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "cardbox_blob_pack_holes" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no cardbox_blob_pack_holes among the store's metrics")
	return 0
}

// A flipped byte of a record that start-up verified, found by
// GET /v1/blobs: a 500 naming the blob and its bytes, a hole on /metrics
// and in pack_holes from then on. And a blob whose hole the pack's scan
// found (blobs.idx lost) is a 500 naming it too, not a 404.
func TestBlobPackDamageFoundOverHTTP(t *testing.T) {
	t.Parallel()
	const n, k = 8, 3
	t.Run("found when read", func(t *testing.T) {
		t.Parallel()
		d := newTurnsStore(t, n)
		entry := d.entry(t, k)
		h := apitest.NewCXDBWith(t, apitest.Options{Dir: d.dir, Pool: d.pool})
		filefault.Flip(t, filepath.Join(store.BlobDir(d.dir), blobpack.PackFile), entry.End()-6) // a payload byte: the record ends with its 4-byte CRC
		if g := packHolesGauge(t, h.Engine); g != 0 {
			t.Fatalf("cardbox_blob_pack_holes %v before the read", g)
		}
		hash, span := fmt.Sprintf("%x", d.turns[k].ContentHash), fmt.Sprintf("bytes %d..%d of blobs.pack", entry.Offset, entry.End())
		for range 2 {
			e := h.Get("/v1/blobs/"+hash).Want(t, http.StatusInternalServerError).APIError(t)
			if !strings.Contains(e.Message, hash) || !strings.Contains(e.Message, span) {
				t.Fatalf("GET /v1/blobs of the damaged blob: %q, want a message naming blob %s and %s", e.Message, hash, span)
			}
			if g := packHolesGauge(t, h.Engine); g != 1 {
				t.Fatalf("cardbox_blob_pack_holes %v after the read, want 1", g)
			}
		}
		waitfor.Soon(t, "the damaged record in pack_holes", func() bool {
			var start, end int64
			err := d.pool.QueryRow(context.Background(), `SELECT start_offset, end_offset FROM pack_holes`).Scan(&start, &end)
			return err == nil && start == entry.Offset && end == entry.End()
		})
	})
	t.Run("the index lost", func(t *testing.T) {
		t.Parallel()
		d := newTurnsStore(t, n)
		entry := d.entry(t, k)
		filefault.Flip(t, filepath.Join(store.BlobDir(d.dir), blobpack.PackFile), entry.Offset+12)
		if err := os.Remove(filepath.Join(store.BlobDir(d.dir), blobpack.IndexFile)); err != nil {
			t.Fatal(err)
		}
		h := apitest.NewCXDBWith(t, apitest.Options{Dir: d.dir, Pool: d.pool})
		hash, span := fmt.Sprintf("%x", d.turns[k].ContentHash), fmt.Sprintf("bytes %d..%d of blobs.pack", entry.Offset, entry.End())
		e := h.Get("/v1/blobs/"+hash).Want(t, http.StatusInternalServerError).APIError(t)
		if !strings.Contains(e.Message, hash) || !strings.Contains(e.Message, span) {
			t.Fatalf("GET /v1/blobs of the lost blob: %q, want a message naming blob %s and %s", e.Message, hash, span)
		}
		h.Get(fmt.Sprintf("/v1/blobs/%x", blake3.Sum256([]byte("never stored")))).Want(t, http.StatusNotFound)
		if got := h.Get(fmt.Sprintf("/v1/blobs/%x", d.turns[k+1].ContentHash)).Want(t, http.StatusOK); !bytes.Equal(got.Body, d.payloads[k+1]) {
			t.Fatalf("GET /v1/blobs of another blob: %q", got.Body)
		}
		if g := packHolesGauge(t, h.Engine); g != 1 {
			t.Fatalf("cardbox_blob_pack_holes %v, want 1", g)
		}
	})
}

// msgpackString is s as a msgpack fixstr.
func msgpackString(s string) []byte { return append([]byte{0xa0 | byte(len(s))}, s...) }
