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

// wideDirectory stores a root directory of n files with names of
// nameBytes (one empty file's hash each) and a turn with it as its fs
// snapshot; it returns the turn.
func wideDirectory(t *testing.T, h *apitest.CXDB, n, nameBytes int) uint64 {
	t.Helper()
	c := h.Client()
	file, _, err := c.PutBlob(context.Background(), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	entries := make([]fstree.Entry, n)
	for i := range entries {
		entries[i] = fstree.Entry{Name: fmt.Sprintf("%06d-%s", i, strings.Repeat("n", nameBytes)), Kind: fstree.KindFile, Mode: 0o644, Size: 1, Hash: file, HashOK: true}
	}
	root, _, err := c.PutBlob(context.Background(), fstree.Encode(entries))
	if err != nil {
		t.Fatal(err)
	}
	head, err := c.CreateContext(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	turn, err := c.AppendTurn(context.Background(), &client.AppendRequest{
		ContextID: head.ContextID, TypeID: "t", TypeVersion: 1, Payload: []byte{0x80}, FSRootHash: &root,
	})
	if err != nil {
		t.Fatal(err)
	}
	return turn.NewTurnID
}

// Directory listings are charged to the answer budget before their JSON
// is built (docs/cxdb-http.md, "Answer bounds"): concurrent large ones
// hold at most the budget and all answer; one over the tenant's share is
// 503 with Retry-After.
func TestDirectoryListingsAreChargedToTheAnswerBudget(t *testing.T) {
	const budgetSize = 6 << 20
	budget := membudget.New(budgetSize, 0, 0)
	h := apitest.NewCXDBWith(t, apitest.Options{Answers: budget, AnswerWait: time.Minute})
	turn := wideDirectory(t, h, 8000, 200) // some 2.5 MiB of JSON

	w := apitest.WatchHeld(t, budget)
	paths := []string{
		fmt.Sprintf("/v1/turns/%d/fs", turn), fmt.Sprintf("/v1/turns/%d/fs?path=", turn),
		fmt.Sprintf("/v1/turns/%d/fs", turn), fmt.Sprintf("/v1/turns/%d/fs", turn),
	}
	size := 0
	for _, a := range getAll(h, paths) {
		if a.err != nil || a.status != http.StatusOK {
			t.Errorf("%s: %d, %v: %.300s", a.path, a.status, a.err, a.body)
		}
		size = len(a.body)
	}
	most := w.Most()
	t.Logf("%d listings of %d bytes at once held at most %d bytes of a %d-byte budget", len(paths), size, most, budgetSize)
	if most < int64(size) || most > budgetSize {
		t.Fatalf("held at most %d bytes, want at least one listing's (%d) and at most the budget's %d", most, size, budgetSize)
	}
	waitfor.Soon(t, "the listings' bytes released once sent", func() bool { return budget.Held() == 0 })

	t.Run("over the share", func(t *testing.T) {
		small := membudget.New(1<<20, 0, 0)
		h := apitest.NewCXDBWith(t, apitest.Options{Answers: small, AnswerWait: 50 * time.Millisecond})
		turn := wideDirectory(t, h, 8000, 200)
		r := h.Get(fmt.Sprintf("/v1/turns/%d/fs", turn)).Want(t, http.StatusServiceUnavailable)
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("a listing over the budget: no Retry-After: %s", r.Body)
		}
	})
}
