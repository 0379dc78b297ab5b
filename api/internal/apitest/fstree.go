package apitest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
	"github.com/cardboxhq/cardbox/internal/testkit"
)

// UploadBasicTree stores the fstree_basic fixture (trees and file
// contents) and a second root that adds an empty directory, and returns
// both roots.
func UploadBasicTree(t testing.TB, c *client.Client) (basic, withEmpty client.Hash) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testkit.RepoRoot(t), "cxdbcompat", "fstree", "testdata", "fstree_basic.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Root  string            `json:"root_hash_hex"`
		Trees map[string]string `json:"trees"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	put := func(b []byte) client.Hash {
		h, _, err := c.PutBlob(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tree := range fx.Trees {
		b, _ := hex.DecodeString(tree)
		put(b)
	}
	for _, content := range []string{"# Test", "#!/bin/bash\necho hi", "package main\n\nfunc foo() {}", "package main"} {
		put([]byte(content))
	}
	rootBytes, _ := hex.DecodeString(fx.Trees[fx.Root])
	entries, err := fstree.Decode(rootBytes)
	if err != nil {
		t.Fatal(err)
	}
	empty := put([]byte{0xc0}) // the official Go client's empty directory: msgpack nil
	entries = append([]fstree.Entry{{Name: "empty", Kind: fstree.KindDir, Mode: 0o755, Hash: empty, HashOK: true}}, entries...)
	b, _ := hex.DecodeString(fx.Root)
	copy(basic[:], b)
	return basic, put(fstree.Encode(entries))
}
