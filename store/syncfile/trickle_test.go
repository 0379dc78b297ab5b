package syncfile

import (
	"bytes"
	"os"
	"testing"
)

// TestTrickleWritesInOrderAndHandsOnWholeSteps writes pieces of several
// sizes through a Trickle and checks that the file holds them in order
// from the offset given, and that every whole step written, and no
// more, was handed to writeback.
func TestTrickleWritesInOrderAndHandsOnWholeSteps(t *testing.T) {
	for _, tc := range []struct {
		name        string
		from, step  int64
		pieces      []int
		wantStarted int64 // from the start of the file
	}{
		{name: "less than a step", step: 16, pieces: []int{5, 10}, wantStarted: 0},
		{name: "exactly a step", step: 16, pieces: []int{16}, wantStarted: 16},
		{name: "pieces across steps", step: 16, pieces: []int{7, 7, 7, 7, 7}, wantStarted: 32},
		{name: "one piece of many steps", step: 16, pieces: []int{100}, wantStarted: 96},
		{name: "from an offset", from: 10, step: 16, pieces: []int{20, 20}, wantStarted: 42},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tempFile(t)
			head := bytes.Repeat([]byte{0xee}, int(tc.from))
			if _, err := f.WriteAt(head, 0); err != nil {
				t.Fatal(err)
			}
			tr := NewTrickle(f, tc.from, tc.step)
			want := append([]byte(nil), head...)
			for i, n := range tc.pieces {
				p := bytes.Repeat([]byte{byte(i + 1)}, n)
				if m, err := tr.Write(p); m != n || err != nil {
					t.Fatalf("write %d: %d, %v; want %d", i, m, err, n)
				}
				want = append(want, p...)
			}
			got, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("file holds %x, want %x", got, want)
			}
			if tr.started != tc.wantStarted {
				t.Errorf("handed to writeback up to %d, want %d", tr.started, tc.wantStarted)
			}
		})
	}
}

// TestTrickleReportsAFailedWrite writes to a file opened read-only.
func TestTrickleReportsAFailedWrite(t *testing.T) {
	f := tempFile(t)
	ro, err := os.Open(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	if _, err := NewTrickle(ro, 0, 4).Write([]byte("abcdefgh")); err == nil {
		t.Fatal("a write to a read-only file succeeded")
	}
}
