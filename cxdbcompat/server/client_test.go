package server_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
)

func turnPayload(i int) []byte {
	return []byte(fmt.Sprintf("\x92\xa4turn\xcd%05d%s", i, bytes.Repeat([]byte{'.'}, i%50)))
}

func ids(turns []client.TurnRecord) []uint64 {
	out := make([]uint64, len(turns))
	for i, t := range turns {
		out[i] = t.TurnID
	}
	return out
}

// TestOfficialClientFlow drives the server with the Go client the way an
// agent runtime does.
func TestOfficialClientFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.dial(client.WithClientTag("flow"))
	ctx := testCtx(t)
	if c.SessionID() == 0 {
		t.Fatal("HELLO gave session id 0")
	}

	head, err := c.CreateContext(ctx, 0)
	if err != nil || head.HeadTurnID != 0 || head.HeadDepth != 0 {
		t.Fatalf("CreateContext: %+v %v", head, err)
	}
	const n = 12
	var appended []client.AppendResult
	for i := range n {
		req := &client.AppendRequest{
			ContextID: head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3,
			Payload: turnPayload(i), IdempotencyKey: fmt.Sprintf("run-1/turn-%d", i),
			CompressZstd: i%3 == 2, // some writers compress
		}
		r, err := c.AppendTurn(ctx, req)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if r.ContextID != head.ContextID || r.NewDepth != uint32(i+1) || r.ContentHash != hashOf(turnPayload(i)) {
			t.Fatalf("append %d: %+v", i, r)
		}
		if i > 0 && r.NewTurnID <= appended[i-1].NewTurnID {
			t.Fatalf("turn ids not increasing: %d after %d", r.NewTurnID, appended[i-1].NewTurnID)
		}
		appended = append(appended, r)
	}
	tip := appended[n-1]

	got, err := c.GetHead(ctx, head.ContextID)
	if err != nil || got.HeadTurnID != tip.NewTurnID || got.HeadDepth != n {
		t.Fatalf("GetHead: %+v %v", got, err)
	}

	withPayload, err := c.GetLast(ctx, head.ContextID, 5, true)
	if err != nil || len(withPayload) != 5 {
		t.Fatalf("GetLast with payload: %d turns, %v", len(withPayload), err)
	}
	for k, turn := range withPayload {
		i := n - 5 + k
		if turn.TurnID != appended[i].NewTurnID || turn.Depth != uint32(i+1) || !bytes.Equal(turn.Payload, turnPayload(i)) ||
			turn.Compression != 0 || int(turn.UncompressedLen) != len(turnPayload(i)) {
			t.Fatalf("GetLast item %d: %+v", k, turn)
		}
		if k > 0 && turn.ParentTurnID != withPayload[k-1].TurnID {
			t.Fatalf("GetLast item %d parent %d, want %d", k, turn.ParentTurnID, withPayload[k-1].TurnID)
		}
	}
	meta, err := c.GetLast(ctx, head.ContextID, 0, false) // 0 = the client's default 10
	if err != nil || len(meta) != client.DefaultLimit {
		t.Fatalf("GetLast without payload: %d turns, %v", len(meta), err)
	}
	for _, turn := range meta {
		i := int(turn.Depth) - 1
		wantCompression := uint32(0)
		if i%3 == 2 {
			wantCompression = cxdbcompat.CompressionZstd // as the writer sent it
		}
		if len(turn.Payload) != 0 || turn.Compression != wantCompression || turn.ContentHash != hashOf(turnPayload(i)) {
			t.Fatalf("metadata-only turn at depth %d: %+v", turn.Depth, turn)
		}
	}

	// A retried append with the same key is the same turn.
	retry, err := c.AppendTurn(ctx, &client.AppendRequest{
		ContextID: head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3,
		Payload: turnPayload(n - 1), IdempotencyKey: fmt.Sprintf("run-1/turn-%d", n-1),
	})
	if err != nil || retry != tip {
		t.Fatalf("retried append = %+v %v, want %+v", retry, err, tip)
	}

	// Fork from the middle and append to the fork: the fork shares the
	// first turns, the original is untouched.
	base := appended[5]
	fork, err := c.ForkContext(ctx, base.NewTurnID)
	if err != nil || fork.ContextID == head.ContextID || fork.HeadTurnID != base.NewTurnID || fork.HeadDepth != base.NewDepth {
		t.Fatalf("ForkContext: %+v %v", fork, err)
	}
	fr, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: fork.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3, Payload: []byte("\xa4fork")})
	if err != nil || fr.NewDepth != base.NewDepth+1 {
		t.Fatalf("append to fork: %+v %v", fr, err)
	}
	forkTurns, err := c.GetLast(ctx, fork.ContextID, 100, true)
	if err != nil || len(forkTurns) != 7 {
		t.Fatalf("fork history: %d turns, %v", len(forkTurns), err)
	}
	for i := range 6 {
		if forkTurns[i].TurnID != appended[i].NewTurnID {
			t.Fatalf("fork turn %d = %d, want shared turn %d", i, forkTurns[i].TurnID, appended[i].NewTurnID)
		}
	}
	if string(forkTurns[6].Payload) != "\xa4fork" || forkTurns[6].ParentTurnID != base.NewTurnID {
		t.Fatalf("fork tip: %+v", forkTurns[6])
	}
	if h, _ := c.GetHead(ctx, head.ContextID); h.HeadTurnID != tip.NewTurnID {
		t.Fatalf("fork moved the original head: %+v", h)
	}
	// GET_BEFORE on the fork walks into the shared history.
	page, err := c.GetBefore(ctx, fork.ContextID, fr.NewTurnID, 3, false)
	if err != nil || !equalIDs(ids(page), []uint64{appended[3].NewTurnID, appended[4].NewTurnID, appended[5].NewTurnID}) {
		t.Fatalf("GetBefore on fork: %v %v", ids(page), err)
	}
	// A turn of the original past the fork point is not on the fork.
	if _, err := c.GetBefore(ctx, fork.ContextID, tip.NewTurnID, 3, false); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GetBefore with a cursor off the fork's chain: %v, want 404", err)
	}

	// Blobs and an fs snapshot whose root was uploaded first.
	file := []byte("package main\n")
	fileHash, isNew, err := c.PutBlob(ctx, file)
	if err != nil || !isNew || fileHash != hashOf(file) {
		t.Fatalf("PutBlob: %s %v %v", fileHash, isNew, err)
	}
	if _, isNew, err := c.PutBlob(ctx, file); err != nil || isNew {
		t.Fatalf("second PutBlob: new=%v %v", isNew, err)
	}
	if data, err := c.GetBlob(ctx, fileHash); err != nil || !bytes.Equal(data, file) {
		t.Fatalf("GetBlob: %q %v", data, err)
	}
	if _, err := c.GetBlob(ctx, hashOf([]byte("never stored"))); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GetBlob of a missing blob: %v", err)
	}
	tree := fstree.Encode([]fstree.Entry{{Name: "main.go", Size: uint64(len(file)), Hash: fileHash, HashOK: true}})
	root, _, err := c.PutBlob(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	att, err := c.AttachFS(ctx, tip.NewTurnID, root)
	if err != nil || att.TurnID != tip.NewTurnID || att.FSRootHash != root {
		t.Fatalf("AttachFS: %+v %v", att, err)
	}
	withFS, err := c.AppendTurn(ctx, &client.AppendRequest{
		ContextID: head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3,
		Payload: []byte("\xa7with fs"), FSRootHash: &root,
	})
	if err != nil || withFS.NewDepth != n+1 {
		t.Fatalf("AppendTurn with fs root: %+v %v", withFS, err)
	}
	for _, id := range []uint64{tip.NewTurnID, withFS.NewTurnID} {
		n := e.count(`SELECT count(*) FROM fs_attachments WHERE turn_id = $1 AND fs_root_hash = $2`, int64(id), root[:]) +
			e.count(`SELECT count(*) FROM turns WHERE turn_id = $1 AND fs_root_hash = $2`, int64(id), root[:])
		if n == 0 {
			t.Fatalf("fs root of turn %d not recorded", id)
		}
	}
	if _, err := c.AttachFS(ctx, tip.NewTurnID, hashOf([]byte("not uploaded"))); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("AttachFS with a missing root: %v", err)
	}
	var se *client.ServerError
	if _, err := c.GetHead(ctx, 987654); !errors.As(err, &se) || se.Code != 404 || se.Kind != "NOT_FOUND" {
		t.Fatalf("GetHead of an unknown context: %v", err)
	}
}

func equalIDs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestGetBeforePagesALongContext pages from the head back to the root with
// GET_LAST then GET_BEFORE and gets every turn exactly once, in order.
func TestGetBeforePagesALongContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.dial(client.WithPipelining())
	ctx := testCtx(t)
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 230
	want := make([]uint64, n)
	for i := range n {
		r, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: head.ContextID, TypeID: "t", TypeVersion: 1, Payload: turnPayload(i)})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = r.NewTurnID
	}
	for _, pageSize := range []uint32{1, 7, 40, n, n + 5} {
		t.Run(fmt.Sprint("page", pageSize), func(t *testing.T) {
			page, err := c.GetLast(ctx, head.ContextID, pageSize, true)
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for len(page) > 0 {
				got = append(ids(page), got...)
				for _, turn := range page {
					if !bytes.Equal(turn.Payload, turnPayload(int(turn.Depth)-1)) {
						t.Fatalf("turn %d at depth %d has the wrong payload", turn.TurnID, turn.Depth)
					}
				}
				if len(page) > int(pageSize) {
					t.Fatalf("page of %d turns, limit %d", len(page), pageSize)
				}
				page, err = c.GetBefore(ctx, head.ContextID, page[0].TurnID, pageSize, true)
				if err != nil {
					t.Fatal(err)
				}
			}
			if !equalIDs(got, want) {
				t.Fatalf("paged %d turns, want %d in order", len(got), len(want))
			}
		})
	}
	// before_turn_id 0 is GET_LAST.
	a, err1 := c.GetBefore(ctx, head.ContextID, 0, 5, false)
	b, err2 := c.GetLast(ctx, head.ContextID, 5, false)
	if err1 != nil || err2 != nil || !equalIDs(ids(a), ids(b)) {
		t.Fatalf("GetBefore(0) = %v %v, GetLast = %v %v", ids(a), err1, ids(b), err2)
	}
	if _, err := c.GetBefore(ctx, head.ContextID+1000, want[5], 5, false); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GetBefore on an unknown context: %v", err)
	}
	if _, err := c.GetBefore(ctx, head.ContextID, want[n-1]+1000, 5, false); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GetBefore with an unknown cursor: %v", err)
	}
}
