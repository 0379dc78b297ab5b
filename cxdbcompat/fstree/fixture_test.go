package fstree

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path"
	"testing"

	"github.com/zeebo/blake3"
)

// The tree objects the official Go client wrote for the fstree_basic
// fixture decode to its files and directories, with their hashes, and
// encode back to the same bytes.
func TestFixtureFSTreeBasic(t *testing.T) {
	raw, err := os.ReadFile("testdata/fstree_basic.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		RootHashHex string            `json:"root_hash_hex"`
		Trees       map[string]string `json:"trees"`
		Files       map[string]string `json:"files"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	trees := map[string][]byte{}
	for h, hx := range fx.Trees {
		b, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatal(err)
		}
		sum := blake3.Sum256(b)
		if hex.EncodeToString(sum[:]) != h {
			t.Fatalf("tree %s does not hash to its name", h)
		}
		trees[h] = b
	}
	files := map[string]string{}
	var walk func(h, dir string)
	walk = func(h, dir string) {
		entries, err := Decode(trees[h])
		if err != nil {
			t.Fatalf("tree %s: %v", h, err)
		}
		if enc := Encode(entries); !bytes.Equal(enc, trees[h]) {
			t.Errorf("tree %s does not encode back to the client's bytes", h)
		}
		for _, e := range entries {
			p := path.Join(dir, e.Name)
			if e.Kind == KindDir {
				walk(hex.EncodeToString(e.Hash[:]), p)
				continue
			}
			files[p] = hex.EncodeToString(e.Hash[:])
		}
	}
	walk(fx.RootHashHex, "")
	if len(files) != len(fx.Files) {
		t.Fatalf("files %v, want %v", files, fx.Files)
	}
	for p, h := range fx.Files {
		if files[p] != h {
			t.Errorf("%s: hash %s, want %s", p, files[p], h)
		}
	}
}
