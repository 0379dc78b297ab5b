package server_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/internal/filefault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testkit/seed"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/blobpack"
)

// A flipped byte in the blob pack costs one blob: GET_BLOB of it is an
// ERROR 500 naming it and its damaged bytes, and a GET_LAST or GET_BEFORE
// window holding its turn answers every turn, that one without its
// payload.

// damagedPack is a store of one context's turns, the payload record of
// turn k damaged (a header byte flipped while the store was closed: a
// hole when it opened again), served by a binary server.
type damagedPack struct {
	*env
	ctxID    uint64
	turns    []store.AppendResult
	payloads [][]byte
	k        int
	entry    blobpack.Entry // of turn k's payload, as written
}

func newDamagedPack(t *testing.T, n, k int) *damagedPack {
	t.Helper()
	return newDamagedPackWith(t, n, k, false)
}

// newDamagedPackWith is newDamagedPack; unindexed also deletes blobs.idx,
// so that the damaged record is a hole found by scanning the pack, which
// nothing in the pack ties to its blob.
func newDamagedPackWith(t *testing.T, n, k int, unindexed bool) *damagedPack {
	t.Helper()
	ctx := context.Background()
	pool, dir := pgtest.NewPool(t), t.TempDir()
	engine, err := store.Open(ctx, store.Options{Dir: dir, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	ten := seed.StoreTenant(t, pool, engine, ident.DefaultTenantID)
	h, err := engine.CreateContext(ctx, ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	d := &damagedPack{ctxID: h.ContextID, k: k}
	for i := range n {
		payload := fmt.Appendf(nil, "payload %d %s", i, strings.Repeat("x", 10*i))
		r, err := engine.Append(ctx, ten, &store.AppendRequest{
			ContextID: h.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3, Encoding: store.EncodingMsgpack,
			UncompressedLen: uint32(len(payload)), ContentHash: hashOf(payload), Payload: payload,
		})
		if err != nil {
			t.Fatal(err)
		}
		d.turns, d.payloads = append(d.turns, r), append(d.payloads, payload)
	}
	if err := engine.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := blobpack.Open(store.BlobDir(dir), blobpack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.entry, _ = p.Lookup(d.turns[k].ContentHash)
	p.Close()
	filefault.Flip(t, filepath.Join(store.BlobDir(dir), blobpack.PackFile), d.entry.Offset+12)
	if unindexed {
		if err := os.Remove(filepath.Join(store.BlobDir(dir), blobpack.IndexFile)); err != nil {
			t.Fatal(err)
		}
	}
	damaged, err := store.Open(ctx, store.Options{Dir: dir, Pool: pool})
	if err != nil {
		t.Fatalf("open after damage: %v", err)
	}
	t.Cleanup(func() { damaged.Close() })
	if damaged.Stats().PackHoles != 1 {
		t.Fatalf("%d holes, want the damaged record's", damaged.Stats().PackHoles)
	}
	d.env = newEnvWith(t, envConfig{
		wrap: func(*store.Engine) store.TurnStore { return damaged },
		allowLog: func(r string) bool {
			return strings.Contains(r, "lies in a damaged record of the blob pack") ||
				strings.Contains(r, "lies in a damaged region of the blob pack")
		},
	})
	return d
}

func TestGetBlobOfADamagedBlobIs500NamingItsBytes(t *testing.T) {
	t.Parallel()
	d := newDamagedPack(t, 12, 5)
	c := dialRaw(t, d.addr)
	h := d.turns[d.k].ContentHash
	resp := c.expectError(cxdbcompat.MsgGetBlob, 0, h[:], 500)
	hash, span := fmt.Sprintf("%x", h), fmt.Sprintf("bytes %d..%d of blobs.pack", d.entry.Offset, d.entry.End())
	if !strings.Contains(resp.Message, hash) || !strings.Contains(resp.Message, span) {
		t.Fatalf("ERROR 500 %q, want it to name blob %s and %s", resp.Message, hash, span)
	}
	if resp.Details["blob"] != hash || resp.Details["damaged_from"] != float64(d.entry.Offset) || resp.Details["damaged_to"] != float64(d.entry.End()) {
		t.Fatalf("details %v, want the blob and its damaged bytes", resp.Details)
	}
	// The connection goes on, and the other blobs read.
	other := d.turns[d.k+1].ContentHash
	got, err := cxdbcompat.DecodeGetBlobResponse(c.expectOK(cxdbcompat.MsgGetBlob, 0, other[:]))
	if err != nil || !bytes.Equal(got.Data, d.payloads[d.k+1]) {
		t.Fatalf("GET_BLOB of another blob: %q, %v", got.Data, err)
	}
}

// A blob whose record lies in a hole the pack's scan found, blobs.idx
// lost: the committed turn that names it tells the store it was stored,
// so GET_BLOB is the same ERROR 500, naming the hole, not a 404.
func TestGetBlobOfABlobTheIndexNoLongerDescribesIs500(t *testing.T) {
	t.Parallel()
	d := newDamagedPackWith(t, 12, 5, true)
	c := dialRaw(t, d.addr)
	h := d.turns[d.k].ContentHash
	resp := c.expectError(cxdbcompat.MsgGetBlob, 0, h[:], 500)
	hash, span := fmt.Sprintf("%x", h), fmt.Sprintf("bytes %d..%d of blobs.pack", d.entry.Offset, d.entry.End())
	if !strings.Contains(resp.Message, hash) || !strings.Contains(resp.Message, span) {
		t.Fatalf("ERROR 500 %q, want it to name blob %s and %s", resp.Message, hash, span)
	}
	if resp.Details["blob"] != hash || resp.Details["damaged_from"] != float64(d.entry.Offset) || resp.Details["damaged_to"] != float64(d.entry.End()) {
		t.Fatalf("details %v, want the blob and its damaged bytes", resp.Details)
	}
	never := hashOf([]byte("never stored"))
	c.expectError(cxdbcompat.MsgGetBlob, 0, never[:], 404)
	other := d.turns[d.k+1].ContentHash
	got, err := cxdbcompat.DecodeGetBlobResponse(c.expectOK(cxdbcompat.MsgGetBlob, 0, other[:]))
	if err != nil || !bytes.Equal(got.Data, d.payloads[d.k+1]) {
		t.Fatalf("GET_BLOB of another blob: %q, %v", got.Data, err)
	}
}

func TestTurnWindowsWithADamagedTurnReadableByTheOfficialClient(t *testing.T) {
	t.Parallel()
	const n = 12
	for _, k := range []int{5, n - 1} {
		t.Run(fmt.Sprintf("turn %d of %d damaged", k, n), func(t *testing.T) {
			t.Parallel()
			d := newDamagedPack(t, n, k)
			c := dialRaw(t, d.addr)
			type window struct {
				name    string
				typ     cxdbcompat.MsgType
				payload []byte
				first   int // index of its oldest turn
				count   int
			}
			windows := []window{
				{"GET_LAST of every turn", cxdbcompat.MsgGetLast, cxdbcompat.GetLastRequest{ContextID: d.ctxID, Limit: n, IncludePayload: true}.AppendTo(nil), 0, n},
				{"GET_LAST of the newest turns from the damaged one", cxdbcompat.MsgGetLast, cxdbcompat.GetLastRequest{ContextID: d.ctxID, Limit: uint32(n - k), IncludePayload: true}.AppendTo(nil), k, n - k},
			}
			if k+1 < n {
				windows = append(windows, window{"GET_BEFORE ending at the damaged turn", cxdbcompat.MsgGetBefore,
					cxdbcompat.GetBeforeRequest{ContextID: d.ctxID, BeforeTurnID: d.turns[k+1].TurnID, Limit: 3, IncludePayload: true}.AppendTo(nil), k - 2, 3})
			}
			for _, w := range windows {
				resp := c.expectOK(w.typ, 0, w.payload)
				if got, err := decodeLikeOfficialClient(resp); err != nil || got != w.count {
					t.Fatalf("%s: the official client's decoding read %d records, %v; want %d", w.name, got, err, w.count)
				}
				turns, err := cxdbcompat.DecodeTurnList(resp)
				if err != nil || len(turns) != w.count {
					t.Fatalf("%s: %d records, %v; want %d", w.name, len(turns), err, w.count)
				}
				for j, got := range turns {
					i := w.first + j
					want := d.turns[i]
					if got.TurnID != want.TurnID || got.Depth != want.Depth || got.ContentHash != cxdbcompat.Hash(want.ContentHash) ||
						got.DeclaredTypeID != "cxdb.ConversationItem" || got.DeclaredTypeVersion != 3 || got.Compression != cxdbcompat.CompressionNone {
						t.Fatalf("%s: record %d: %+v, want turn %+v", w.name, i, got, want)
					}
					wantPayload := d.payloads[i]
					if i == k {
						wantPayload = []byte{} // the damaged turn: no payload, its metadata intact
					}
					if !bytes.Equal(got.Payload, wantPayload) || got.UncompressedLen != uint32(len(wantPayload)) {
						t.Fatalf("%s: record %d: payload %q, uncompressed_len %d; want %q", w.name, i, got.Payload, got.UncompressedLen, wantPayload)
					}
				}
			}
		})
	}
}
