package segment

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// A rewrite of a closed segment, shorter than its range, replaces the
// generation the set holds; reads of the other segments are unchanged,
// a read in the gap after it fails with ErrGap, and the stream opens
// again with the gap. A generation-0 segment short of the next is still
// refused.
func TestReplaceWithShorterRewrite(t *testing.T) {
	l := Layout{Dir: t.TempDir(), Base: "turns.log"}
	s, err := Open(l, Options{MaxSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	want := stream(t, s, 0, 10) // segments of 90, 90, 90, 30

	rewrite := ID{Start: 90, Gen: 1}
	if err := os.WriteFile(l.Path(rewrite), want[90:120], 0o644); err != nil {
		t.Fatal(err)
	}
	old, err := s.Replace(rewrite)
	if err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if old.ID != (ID{Start: 90}) || old.Length != 90 {
		t.Fatalf("Replace returned %+v, want the 90 bytes of generation 0", old)
	}
	if err := os.Remove(old.Path); err != nil {
		t.Fatal(err)
	}
	check := func(s *Set) {
		t.Helper()
		got := make([]byte, 30)
		for _, off := range []int64{0, 60, 90, 180, 270} {
			if _, err := s.ReadAt(got, off); err != nil || !bytes.Equal(got, want[off:off+30]) {
				t.Errorf("ReadAt(%d) = %v, %v", off, got, err)
			}
		}
		if _, err := s.ReadAt(got, 120); !errors.Is(err, ErrGap) {
			t.Errorf("ReadAt in the gap: %v, want ErrGap", err)
		}
	}
	check(s)
	if _, err := s.Replace(ID{Start: 270, Gen: 1}); err == nil {
		t.Error("Replace of the active segment succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openSet(t, l, Options{MaxSize: 100})
	check(s)
	if got := s.Segments()[1]; got.ID != rewrite || got.Length != 30 {
		t.Errorf("reopened, the rewrite is %+v", got)
	}
	s.Close()

	// The same gap after a segment written by appends is lost bytes.
	if err := os.Truncate(l.Path(ID{Start: 180}), 60); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(l, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a short generation-0 segment: %v, want ErrCorrupt", err)
	}
}
