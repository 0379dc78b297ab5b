package syncfile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func tempFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func size(t *testing.T, f *os.File) int64 {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// write stands in for the single writer: it reserves, then writes data.
func write(t *testing.T, r *Reserve, f *os.File, off int64, data []byte) {
	t.Helper()
	if err := r.Ensure(off + int64(len(data))); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
}

func TestReserveKeepsZerosAheadOfTheData(t *testing.T) {
	const chunk = 64 << 10
	f := tempFile(t)
	r := NewReserve(f, 0, chunk)
	data := bytes.Repeat([]byte{0xAB}, 1000)
	var off int64
	for range 300 { // ~300 KB: several in-line and background extensions
		write(t, r, f, off, data)
		off += int64(len(data))
		if s := size(t, f); s < off {
			t.Fatalf("file is %d bytes, data reaches %d", s, off)
		}
	}
	r.Close() // waits for a background extension
	s := size(t, f)
	if s < off+chunk/2 {
		t.Fatalf("file is %d bytes, want at least half a chunk past the data end %d", s, off)
	}
	if s > off+2*chunk {
		t.Fatalf("file is %d bytes, want at most two chunks past the data end %d", s, off)
	}
	for _, tt := range []struct {
		from int64
		want bool
	}{{off, true}, {off - 1, false}, {0, false}, {s, true}} {
		if got, err := ZeroTail(f, tt.from, s); err != nil || got != tt.want {
			t.Errorf("ZeroTail(%d, %d) = %v, %v; want %v", tt.from, s, got, err, tt.want)
		}
	}
}

func TestReserveTruncate(t *testing.T) {
	f := tempFile(t)
	r := NewReserve(f, 0, 4096)
	write(t, r, f, 0, bytes.Repeat([]byte{1}, 3000))
	if err := r.Truncate(1000); err != nil {
		t.Fatal(err)
	}
	if s := size(t, f); s != 1000 {
		t.Fatalf("size after Truncate = %d, want 1000", s)
	}
	write(t, r, f, 1000, []byte{2})
	r.Close()
	if s := size(t, f); s <= 1001 {
		t.Fatalf("size = %d: the reservation was not renewed", s)
	}
	if zero, _ := ZeroTail(f, 1001, size(t, f)); !zero {
		t.Fatal("bytes past the data are not zero")
	}
}

func TestReserveAdoptsAnExistingFile(t *testing.T) {
	f := tempFile(t)
	if _, err := f.Write(make([]byte, 10000)); err != nil {
		t.Fatal(err)
	}
	r := NewReserve(f, 10000, 8192)
	write(t, r, f, 0, []byte("data")) // well inside: no extension needed yet
	if s := size(t, f); s != 10000 {
		t.Fatalf("size = %d, want 10000 (nothing to extend)", s)
	}
	write(t, r, f, 9000, make([]byte, 100)) // less than half a chunk left: grows in the background
	r.Close()
	if s := size(t, f); s != 10000+8192 {
		t.Fatalf("size = %d, want %d", s, 10000+8192)
	}
}

func TestZeroTailOfAnEmptyRange(t *testing.T) {
	f := tempFile(t)
	if zero, err := ZeroTail(f, 0, 0); err != nil || !zero {
		t.Fatalf("ZeroTail of nothing = %v, %v", zero, err)
	}
}
