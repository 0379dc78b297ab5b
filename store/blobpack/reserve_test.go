package blobpack

import (
	"os"
	"path/filepath"
	"testing"
)

const testReserve = 64 << 10

// newReservedPack stores blobs in a fresh pack that keeps a reservation
// and returns its directory and the pack's data size; the file ends with
// zeros.
func newReservedPack(t *testing.T, blobs [][]byte) (dir string, end int64) {
	t.Helper()
	dir = t.TempDir()
	p := openPack(t, dir, Options{Reserve: testReserve})
	for _, b := range blobs {
		put(t, p, item(b, 1))
	}
	end = p.Stats().PackBytes
	closePack(t, p)
	if n := sizeOf(t, filepath.Join(dir, PackFile)); n <= end {
		t.Fatalf("pack file is %d bytes for %d bytes of records: no reservation", n, end)
	}
	return dir, end
}

func reservedBlobs(n int) [][]byte {
	blobs := make([][]byte, n)
	for i := range blobs {
		blobs[i] = randBytes(uint64(i), 3000) // 300 KB: the reservation grows several times
	}
	return blobs
}

func TestReservedPackReopensWithoutTornBytes(t *testing.T) {
	blobs := reservedBlobs(100)
	dir, end := newReservedPack(t, blobs)
	fileSize := sizeOf(t, filepath.Join(dir, PackFile))
	for _, withIndex := range []bool{true, false} {
		d := copyDir(t, dir)
		if !withIndex {
			os.Remove(filepath.Join(d, IndexFile)) // recovery scans the pack up to the zeros
		}
		p := openPack(t, d, Options{Reserve: testReserve, MinValidSize: end})
		if r := p.Recovery(); r.TornBytes != 0 || p.Stats().PackBytes != end {
			t.Fatalf("index %v: Recovery = %+v, PackBytes %d; want no torn bytes and %d", withIndex, r, p.Stats().PackBytes, end)
		}
		if n := sizeOf(t, filepath.Join(d, PackFile)); n != fileSize {
			t.Fatalf("index %v: pack file is %d bytes after Open, was %d", withIndex, n, fileSize)
		}
		checkBlobs(t, p, blobs...)
		extra := randBytes(999, 2000)
		put(t, p, item(extra, 1))
		closePack(t, p)
		p = openPack(t, d, Options{Reserve: testReserve})
		checkBlobs(t, p, append(blobs, extra)...)
	}
}

func TestReservedPackTornTail(t *testing.T) {
	blobs := reservedBlobs(5)
	dir, end := newReservedPack(t, blobs)
	fileSize := sizeOf(t, filepath.Join(dir, PackFile))
	// A record of the next Put, written in part over the zeros.
	next := openPack(t, t.TempDir(), Options{})
	put(t, next, item(randBytes(77, 3000), 1))
	rec := readFile(t, filepath.Join(next.dir, PackFile))
	for _, tt := range []struct {
		name string
		off  int64
		b    []byte
	}{
		{"partial record", end, rec[:100]},
		{"stray byte in the zeros", end + 10000, []byte{9}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := copyDir(t, dir)
			f, err := os.OpenFile(filepath.Join(d, PackFile), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(tt.b, tt.off); err != nil {
				t.Fatal(err)
			}
			f.Close()
			p := openPack(t, d, Options{Reserve: testReserve, MinValidSize: end})
			if r := p.Recovery(); r.TornBytes != fileSize-end {
				t.Fatalf("Recovery = %+v, want %d torn bytes", r, fileSize-end)
			}
			if n := sizeOf(t, filepath.Join(d, PackFile)); n != end {
				t.Fatalf("pack file is %d bytes, want it cut at %d", n, end)
			}
			checkBlobs(t, p, blobs...)
			put(t, p, item(randBytes(78, 100), 1))
		})
	}
}
