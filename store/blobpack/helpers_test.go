package blobpack

import (
	"bytes"
	"fmt"
	"github.com/cardboxhq/cardbox/internal/filefault"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/zeebo/blake3"
)

func hashOf(data []byte) Hash { return blake3.Sum256(data) }

func item(data []byte, owner uint32) PutItem {
	return PutItem{Hash: hashOf(data), Data: data, Owner: owner}
}

// randBytes returns n incompressible bytes determined by seed.
func randBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	r.Read(b)
	return b
}

// textBytes returns n compressible bytes.
func textBytes(n int) []byte {
	var buf bytes.Buffer
	for i := 0; buf.Len() < n; i++ {
		fmt.Fprintf(&buf, `{"role":"assistant","turn":%d,"text":"the quick brown fox"},`, i)
	}
	return buf.Bytes()[:n]
}

// uniqueText returns a compressible blob of n bytes unique to seed.
func uniqueText(seed uint64, n int) []byte {
	b := textBytes(n)
	copy(b, fmt.Sprintf("%016x", seed))
	return b
}

func openPack(t testing.TB, dir string, opts Options) *Pack {
	t.Helper()
	p, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func put(t testing.TB, p *Pack, items ...PutItem) []Result {
	t.Helper()
	res, err := p.Put(items)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return res
}

func closePack(t testing.TB, p *Pack) {
	t.Helper()
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func sizeOf(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// copyDir copies the files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range ents {
		copyFile(t, filepath.Join(src, de.Name()), filepath.Join(dst, de.Name()))
	}
	return dst
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	filefault.Flip(t, path, off)
}

// checkBlobs fails unless every blob in want reads back from p.
func checkBlobs(t testing.TB, p *Pack, want ...[]byte) {
	t.Helper()
	for i, data := range want {
		got, err := p.Read(hashOf(data))
		if err != nil {
			t.Fatalf("blob %d: Read: %v", i, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("blob %d: Read returned different bytes", i)
		}
	}
}
