package cxdbhttp_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/api/internal/apitest"
	"github.com/cardboxhq/cardbox/cxdbcompat/client"
)

func TestFSBrowse(t *testing.T) {
	h := apitest.NewCXDB(t)
	c := h.Client()
	basic, withEmpty := apitest.UploadBasicTree(t, c)
	head, _ := c.CreateContext(context.Background(), 0)
	first, err := c.AppendTurn(context.Background(), &client.AppendRequest{
		ContextID: head.ContextID, TypeID: "t", TypeVersion: 1, Payload: []byte{0x80}, FSRootHash: &basic,
	})
	if err != nil {
		t.Fatal(err)
	}
	child := appendBinary(t, c, head.ContextID, []byte{0x80}) // inherits the snapshot
	second := appendBinary(t, c, head.ContextID, []byte{0x81, 0x01, 0x02})
	if _, err := c.AttachFS(context.Background(), second.NewTurnID, withEmpty); err != nil {
		t.Fatal(err)
	}

	type listing struct {
		TurnID     string `json:"turn_id"`
		Path       string
		FSRootHash string `json:"fs_root_hash"`
		Entries    []map[string]any
	}
	var root, src, empty listing
	h.Get(fmt.Sprintf("/v1/turns/%d/fs", child.NewTurnID)).Want(t, http.StatusOK).JSON(t, &root)
	if root.FSRootHash != hex.EncodeToString(basic[:]) || len(root.Entries) != 3 || root.Entries[0]["name"] != "README.md" || root.Entries[0]["mode"] != "644" {
		t.Fatalf("root listing: %+v", root)
	}
	h.Get(fmt.Sprintf("/v1/turns/%d/fs?path=src", first.NewTurnID)).Want(t, http.StatusOK).JSON(t, &src)
	if len(src.Entries) != 2 || src.Entries[1]["name"] != "main.go" || src.Entries[1]["kind"] != "file" {
		t.Fatalf("src listing: %+v", src)
	}
	file := h.Get(fmt.Sprintf("/v1/turns/%d/fs/src/lib.go", first.NewTurnID)).Want(t, http.StatusOK)
	if string(file.Body) != "package main\n\nfunc foo() {}" || file.Header.Get("Content-Type") != "text/x-go" ||
		file.Header.Get("X-Fs-Mode") != "644" || file.Header.Get("X-Fs-Hash") != fmt.Sprintf("%x", blake3.Sum256(file.Body)) {
		t.Fatalf("file: %q %v", file.Body, file.Header)
	}
	var asJSON map[string]any
	h.Get(fmt.Sprintf("/v1/turns/%d/fs/script.sh?format=json", first.NewTurnID)).Want(t, http.StatusOK).JSON(t, &asJSON)
	if asJSON["content_base64"] != base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\necho hi")) || asJSON["mode"] != "755" {
		t.Fatalf("format=json: %v", asJSON)
	}
	h.Get(fmt.Sprintf("/v1/turns/%d/fs/src", first.NewTurnID)).Want(t, http.StatusOK).JSON(t, &src)
	if len(src.Entries) != 2 {
		t.Fatalf("directory through the file route: %+v", src)
	}
	h.Get(fmt.Sprintf("/v1/turns/%d/fs?path=empty", second.NewTurnID)).Want(t, http.StatusOK).JSON(t, &empty)
	if empty.Entries == nil || len(empty.Entries) != 0 {
		t.Fatalf("empty directory: %+v", empty)
	}

	for _, tt := range []struct {
		path   string
		status int
	}{
		{fmt.Sprintf("/v1/turns/%d/fs?path=nope", first.NewTurnID), http.StatusNotFound},
		{fmt.Sprintf("/v1/turns/%d/fs/README.md/x", first.NewTurnID), http.StatusUnprocessableEntity},
		{fmt.Sprintf("/v1/turns/%d/fs?path=README.md", first.NewTurnID), http.StatusUnprocessableEntity},
		{"/v1/turns/424242/fs", http.StatusNotFound},
		{"/v1/turns/abc/fs", http.StatusBadRequest},
	} {
		if r := h.Get(tt.path); r.Status != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.path, r.Status, r.Body, tt.status)
		}
	}
	h.Get("/v1/blobs/"+hex.EncodeToString(basic[:])).Want(t, http.StatusOK)
	h.Get("/v1/blobs/xyz").Want(t, http.StatusBadRequest)
	h.Get(fmt.Sprintf("/v1/blobs/%x", blake3.Sum256([]byte("never stored")))).Want(t, http.StatusNotFound)
}
