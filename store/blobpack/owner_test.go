package blobpack

import (
	"os"
	"path/filepath"
	"testing"
)

// OwnerBytes counts each blob once, for the tenant that stored it first,
// in uncompressed bytes, and is the same after a reopen (from the index)
// and after the index is rebuilt from the pack.
func TestOwnerBytes(t *testing.T) {
	dir := t.TempDir()
	p := openPack(t, dir, Options{})
	a, b := textBytes(10_000), randBytes(1, 300)
	put(t, p, item(a, 1), item(b, 2), item(a, 2)) // a again, by tenant 2: not its
	put(t, p, item(b, 1))                         // b again, by tenant 1: not its
	want := map[uint32]int64{1: int64(len(a)), 2: int64(len(b)), 3: 0}
	check := func(when string, p *Pack) {
		t.Helper()
		for owner, n := range want {
			if got := p.OwnerBytes(owner); got != n {
				t.Errorf("%s: OwnerBytes(%d) = %d, want %d", when, owner, got, n)
			}
		}
	}
	check("after put", p)
	closePack(t, p)
	p = openPack(t, dir, Options{})
	check("after reopen", p)
	closePack(t, p)
	if err := os.Remove(filepath.Join(dir, IndexFile)); err != nil {
		t.Fatal(err)
	}
	check("after rebuilding the index", openPack(t, dir, Options{}))
}
