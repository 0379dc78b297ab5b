package daemon_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/daemon/daemontest"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store/salvage"
)

// Deleting a context releases its blobs once the reaper has buried its
// turns: GET_BLOB, GET /v1/blobs/{hash} and POST /v1/blobs/missing answer
// as for bytes never stored, `cardbox verify` stays clean, and uploading
// the bytes again makes them readable again.
func TestDeletedContextsBlobsAreReleasedOnEverySurface(t *testing.T) {
	var dir string
	d := daemontest.New(t, func(cfg *daemon.Config) { cfg.BlobClaimGrace, dir = time.Nanosecond, cfg.DataDir })
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	c, err := client.Dial(ctx, d.BinaryAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	file := []byte("a file of the snapshot")
	fh, _, err := c.PutBlob(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	tree := fstree.Encode([]fstree.Entry{{Name: "f.txt", Kind: fstree.KindFile, Hash: fh, HashOK: true, Size: uint64(len(file))}})
	th, _, err := c.PutBlob(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte{0xa7, 'r', 'e', 'l', 'e', 'a', 's', 'e'}
	if _, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: head.ContextID, TypeID: "test.Note", TypeVersion: 1, Payload: payload, FSRootHash: &th}); err != nil {
		t.Fatal(err)
	}
	ph := client.Hash(blake3.Sum256(payload))
	hashes := []client.Hash{fh, th, ph}
	for _, h := range hashes {
		if _, err := c.GetBlob(ctx, h); err != nil {
			t.Fatalf("blob %x before the deletion: %v", h[:4], err)
		}
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, fmt.Sprintf("http://%s/v1/contexts/%d", d.HTTPAddr(), head.ContextID), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %s, want 204", res.Status)
	}
	never := client.Hash{0xee}
	waitfor.True(t, "the reaper released the blobs", ioTimeout, func() bool {
		return httpGetBlob(ctx, t, d, ph) == http.StatusNotFound
	})
	for _, h := range hashes {
		if got, want := httpGetBlob(ctx, t, d, h), httpGetBlob(ctx, t, d, never); got != want {
			t.Errorf("GET /v1/blobs/%x: %d, as for bytes never stored %d", h[:4], got, want)
		}
		_, got := c.GetBlob(ctx, h)
		_, want := c.GetBlob(ctx, never)
		if got == nil || want == nil || strings.ReplaceAll(got.Error(), hex.EncodeToString(h[:]), hex.EncodeToString(never[:])) != want.Error() {
			t.Errorf("GET_BLOB %x: %v; for bytes never stored: %v", h[:4], got, want)
		}
	}
	if missing := httpMissing(ctx, t, d, hashes); len(missing) != len(hashes) {
		t.Errorf("POST /v1/blobs/missing: %v, want all %d", missing, len(hashes))
	}
	report, err := salvage.Verify(ctx, dir, d.Pool(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(report.PackDefects)+len(report.LogDefects)+len(report.Problems) != 0 {
		t.Errorf("verify after the release: %+v; want clean", report)
	}

	if _, _, err := c.PutBlob(ctx, file); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetBlob(ctx, fh); err != nil || !bytes.Equal(got, file) {
		t.Errorf("GET_BLOB after uploading again: %q, %v", got, err)
	}
	if missing := httpMissing(ctx, t, d, hashes); len(missing) != 2 {
		t.Errorf("POST /v1/blobs/missing after uploading the file again: %v, want the tree and the payload", missing)
	}
}

func httpGetBlob(ctx context.Context, t *testing.T, d *daemon.Daemon, h client.Hash) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/v1/blobs/%x", d.HTTPAddr(), h[:]), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func httpMissing(ctx context.Context, t *testing.T, d *daemon.Daemon, hashes []client.Hash) []string {
	t.Helper()
	var body struct {
		Hashes []string `json:"hashes"`
	}
	for _, h := range hashes {
		body.Hashes = append(body.Hashes, hex.EncodeToString(h[:]))
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s/v1/blobs/missing", d.HTTPAddr()), bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Missing []string `json:"missing"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("POST /v1/blobs/missing: %s: %v", res.Status, err)
	}
	return out.Missing
}
