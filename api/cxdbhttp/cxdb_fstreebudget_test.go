package cxdbhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/internal/membudget"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

// wideRootTurn stores a root directory of n files with names of nameBytes
// and one small directory, "sub", of one file, "f"; it returns a turn with
// that root as its fs snapshot and the name of the root's first file.
// What the routes below answer is small; the root's tree object they read
// on the way is not.
func wideRootTurn(t *testing.T, h *apitest.CXDB, n, nameBytes int) (turn uint64, first string) {
	t.Helper()
	ctx := context.Background()
	c := h.Client()
	file, _, err := c.PutBlob(ctx, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	sub, _, err := c.PutBlob(ctx, fstree.Encode([]fstree.Entry{{Name: "f", Kind: fstree.KindFile, Mode: 0o644, Size: 1, Hash: file, HashOK: true}}))
	if err != nil {
		t.Fatal(err)
	}
	entries := []fstree.Entry{{Name: "sub", Kind: fstree.KindDir, Mode: 0o755, Hash: sub, HashOK: true}}
	for i := range n {
		name := fmt.Sprintf("%06d-%s", i, strings.Repeat("n", nameBytes))
		entries = append(entries, fstree.Entry{Name: name, Kind: fstree.KindFile, Mode: 0o644, Size: 1, Hash: file, HashOK: true})
	}
	root, _, err := c.PutBlob(ctx, fstree.Encode(entries))
	if err != nil {
		t.Fatal(err)
	}
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.AppendTurn(ctx, &client.AppendRequest{
		ContextID: head.ContextID, TypeID: "t", TypeVersion: 1, Payload: []byte{0x80}, FSRootHash: &root,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.NewTurnID, entries[1].Name
}

// The fs routes charge each tree object they read at its size before
// reading it (docs/cxdb-http.md, "Answer bounds"): a small file or
// listing under a large directory is 503 with Retry-After while the
// budget is spent, answers once it is not, and is 503 when the directory
// alone is over the tenant's share.
func TestFSTreeObjectsAreChargedBeforeTheyAreRead(t *testing.T) {
	const files, nameBytes = 8000, 200 // a root tree object of some 2 MiB
	paths := func(turn uint64, first string) []string {
		return []string{
			fmt.Sprintf("/v1/turns/%d/fs/%s", turn, first),
			fmt.Sprintf("/v1/turns/%d/fs/sub", turn),
			fmt.Sprintf("/v1/turns/%d/fs?path=sub", turn),
			fmt.Sprintf("/v1/turns/%d/fs/sub/f?format=json", turn),
		}
	}
	refused := func(t *testing.T, h *apitest.CXDB, path string) {
		t.Helper()
		r := h.Get(path).Want(t, http.StatusServiceUnavailable)
		if e := r.APIError(t); r.Header.Get("Retry-After") != "1" || e.Kind != "UNAVAILABLE" || e.Details["needed_bytes"] == nil {
			t.Errorf("%s: %+v, Retry-After %q", path, e, r.Header.Get("Retry-After"))
		}
	}

	t.Run("spent budget", func(t *testing.T) {
		budget := membudget.New(8<<20, 0, 0)
		h := apitest.NewCXDBWith(t, apitest.Options{Answers: budget, AnswerWait: 50 * time.Millisecond})
		turn, first := wideRootTurn(t, h, files, nameBytes)
		if err := budget.Acquire(context.Background(), "default", budget.Total()); err != nil {
			t.Fatal(err)
		}
		for _, path := range paths(turn, first) {
			refused(t, h, path)
		}
		budget.Release("default", budget.Total())
		w := apitest.WatchHeld(t, budget)
		for _, path := range paths(turn, first) {
			h.Get(path).Want(t, http.StatusOK)
		}
		if most := w.Most(); most > budget.Total() {
			t.Errorf("held at most %d bytes of a %d-byte budget", most, budget.Total())
		}
		waitfor.Soon(t, "the tree objects' bytes released", func() bool { return budget.Held() == 0 })
	})

	t.Run("over the share", func(t *testing.T) {
		budget := membudget.New(1<<20, 0, 0)
		h := apitest.NewCXDBWith(t, apitest.Options{Answers: budget, AnswerWait: time.Minute})
		turn, first := wideRootTurn(t, h, files, nameBytes)
		for _, path := range paths(turn, first) {
			refused(t, h, path) // at once: waiting would never make room
		}
		if held := budget.Held(); held != 0 {
			t.Fatalf("%d bytes held after the refusals, want 0", held)
		}
	})
}
