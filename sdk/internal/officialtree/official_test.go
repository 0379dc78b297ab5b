package officialtree

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	official "github.com/strongdm/ai-cxdb/clients/go/fstree"

	"github.com/cardboxhq/cardbox/sdk"
	"github.com/cardboxhq/cardbox/sdk/fstree"
)

// TestSameTreeBytes captures one directory with both and compares the
// root hash and every tree object byte for byte.
func TestSameTreeBytes(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"README.md":           "# hello\n",
		"src/main.go":         "package main\n",
		"src/lib/util.go":     "package lib\n",
		"src/lib/zz_last.txt": "",
		"Büro/ünïcode.txt":    "ü",
		"a b/with space":      "spaces",
		"big.bin":             string(bytes.Repeat([]byte{0xAB}, 200000)),
	}
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.Chmod(filepath.Join(dir, "src/main.go"), 0o755))
	must(t, os.Chmod(filepath.Join(dir, "README.md"), 0o600))
	must(t, os.MkdirAll(filepath.Join(dir, "empty/deeper"), 0o700))
	must(t, os.Symlink("src/main.go", filepath.Join(dir, "link")))
	must(t, os.Symlink("../nowhere", filepath.Join(dir, "src/dangling")))
	must(t, os.Symlink(".", filepath.Join(dir, "src/self"))) // a loop, recorded not followed

	theirs, err := official.Capture(dir)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := fstree.Capture(dir, fstree.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(ours.Root), fmt.Sprintf("%x", theirs.RootHash); got != want {
		t.Errorf("root %s, the official client's %s", got, want)
	}
	if len(ours.Trees) != len(theirs.Trees) {
		t.Errorf("%d trees, the official client %d", len(ours.Trees), len(theirs.Trees))
	}
	for h, b := range theirs.Trees {
		if mine := ours.Trees[sdkHash(h)]; !bytes.Equal(mine, b) {
			t.Errorf("tree %x: ours %x, theirs %x", h, mine, b)
		}
	}
	if ours.Stats.FileCount != theirs.Stats.FileCount || ours.Stats.SymlinkCount != theirs.Stats.SymlinkCount || ours.Stats.TotalBytes != theirs.Stats.TotalBytes {
		t.Errorf("stats %+v, the official client's %+v", ours.Stats, theirs.Stats)
	}
}

func sdkHash(h [32]byte) sdk.BlobHash { return sdk.BlobHash(fmt.Sprintf("%x", h)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
