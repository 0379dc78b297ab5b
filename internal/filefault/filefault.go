// Package filefault damages real files for tests of what the store does
// with damage: the files stay real, only their bytes change.
package filefault

import (
	"os"
	"testing"
)

// Flip inverts some bits of the byte at off in the file at path.
func Flip(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x55
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}
