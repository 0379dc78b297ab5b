package segment

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/zeebo/blake3"
)

func TestNamesRoundTrip(t *testing.T) {
	l := Layout{Dir: t.TempDir(), Base: "blobs.pack"}
	for _, c := range []struct {
		id   ID
		name string
	}{
		{ID{}, "blobs.pack"},
		{ID{Start: 0, Gen: 1}, "blobs.pack.0000000000000000.1"},
		{ID{Start: 1 << 28}, "blobs.pack.0000000010000000.0"},
		{ID{Start: 1<<63 - 1, Gen: 1<<32 - 1}, "blobs.pack.7fffffffffffffff.4294967295"},
	} {
		if got := l.Name(c.id); got != c.name {
			t.Errorf("Name(%+v) = %q, want %q", c.id, got, c.name)
		}
		if got, ok := l.Parse(c.name); !ok || got != c.id {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.name, got, ok, c.id)
		}
	}
	for _, name := range []string{
		"blobs.idx", "blobs.pack.bak", "blobs.pack.rebuild", "blobs.pack.0000000000000000.0",
		"blobs.pack.0000000010000000.00", "blobs.pack.0000000010000000.+1", "blobs.pack.000000001000000A.0",
		"blobs.pack.10000000.0", "blobs.pack.0000000010000000.0.bak", "blobs.pack.8000000000000000.0",
	} {
		if id, ok := l.Parse(name); ok {
			t.Errorf("Parse(%q) = %+v, want no segment", name, id)
		}
	}
}

func FuzzParse(f *testing.F) {
	l := Layout{Base: "turns.log"}
	for _, s := range []string{"turns.log", "turns.log.0000000000001000.0", "turns.log.bak", "turns.log.00000000000010x0.7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		id, ok := l.Parse(name)
		if !ok {
			return
		}
		if id.Start < 0 || l.Name(id) != name {
			t.Fatalf("Parse(%q) = %+v, which is named %q", name, id, l.Name(id))
		}
	})
}

func openSet(t *testing.T, l Layout, opts Options) *Set {
	t.Helper()
	s, err := Open(l, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// stream writes n chunks of 30 bytes (chunk i filled with byte i) and
// returns the bytes written.
func stream(t *testing.T, s *Set, from int64, n int) []byte {
	t.Helper()
	var all []byte
	off := from
	for i := range n {
		chunk := bytes.Repeat([]byte{byte(i + 1)}, 30)
		if err := s.Write(chunk, off); err != nil {
			t.Fatalf("Write at %d: %v", off, err)
		}
		off += int64(len(chunk))
		all = append(all, chunk...)
	}
	return all
}

func TestRolloverKeepsOneOffsetSpace(t *testing.T) {
	l := Layout{Dir: t.TempDir(), Base: "turns.log"}
	var rolled []Info
	s := openSet(t, l, Options{MaxSize: 100, Reserve: 4096, OnRollover: func(i Info) { rolled = append(rolled, i) }})
	want := stream(t, s, 0, 10) // 300 bytes: segments of 90, 90, 90, 30

	starts := []int64{0, 90, 180, 270}
	segs := s.Segments()
	if len(segs) != len(starts) {
		t.Fatalf("%d segments, want %d: %+v", len(segs), len(starts), segs)
	}
	for i, seg := range segs {
		if seg.ID.Start != starts[i] || seg.Path != l.Path(ID{Start: starts[i]}) {
			t.Errorf("segment %d is %+v, want start %d", i, seg, starts[i])
		}
	}
	if len(rolled) != 3 || rolled[2] != (Info{ID: ID{Start: 180}, Path: l.Path(ID{Start: 180}), Length: 90}) {
		t.Errorf("rollovers told: %+v", rolled)
	}
	for _, c := range s.Closed() {
		fi, err := os.Stat(c.Path)
		if err != nil || fi.Size() != 90 {
			t.Errorf("closed segment %s: %v, %d bytes; want 90, its reservation cut", c.Path, err, fi.Size())
		}
	}
	got := make([]byte, len(want))
	if _, err := s.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadAt across segments: %v, equal %v", err, bytes.Equal(got, want))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened, the stream reads the same; the active segment keeps its
	// reservation of zeros after its 30 bytes.
	s = openSet(t, l, Options{MaxSize: 100, ReadOnly: true})
	if s.Size() < 300 {
		t.Fatalf("reopened size %d, want at least 300", s.Size())
	}
	if zero, err := s.ZeroTail(300, s.Size()); err != nil || !zero {
		t.Fatalf("ZeroTail(300, %d) = %v, %v", s.Size(), zero, err)
	}
	got = make([]byte, len(want))
	if _, err := s.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadAt after reopening: %v", err)
	}
	if _, err := s.ReadAt(make([]byte, 10), s.Size()); !errors.Is(err, io.EOF) {
		t.Fatalf("ReadAt past the end: %v, want io.EOF", err)
	}
}

func TestOversizedWriteGetsASegmentOfItsOwn(t *testing.T) {
	l := Layout{Dir: t.TempDir(), Base: "blobs.pack"}
	s := openSet(t, l, Options{MaxSize: 100})
	stream(t, s, 0, 1)
	if err := s.Write(make([]byte, 250), 30); err != nil {
		t.Fatal(err)
	}
	if err := s.Write([]byte{1}, 280); err != nil {
		t.Fatal(err)
	}
	var starts []int64
	for _, seg := range s.Segments() {
		starts = append(starts, seg.ID.Start)
	}
	if len(starts) != 3 || starts[1] != 30 || starts[2] != 280 {
		t.Fatalf("segments start at %v, want [0 30 280]", starts)
	}
}

func TestTruncateIntoAClosedSegment(t *testing.T) {
	l := Layout{Dir: t.TempDir(), Base: "turns.log"}
	s := openSet(t, l, Options{MaxSize: 100, Reserve: 4096})
	want := stream(t, s, 0, 10)
	if err := s.Truncate(120); err != nil { // inside the second segment [90, 180)
		t.Fatal(err)
	}
	ids, err := l.List()
	if err != nil || len(ids) != 2 || ids[1].Start != 90 {
		t.Fatalf("after Truncate(120): segments %+v, %v; want the first two", ids, err)
	}
	if fi, err := os.Stat(l.Path(ids[1])); err != nil || fi.Size() != 30 {
		t.Fatalf("the cut segment: %v, want 30 bytes", err)
	}
	// Writing again rolls over at the bound as before.
	if err := s.Write(want[120:300], 120); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openSet(t, l, Options{MaxSize: 100})
	got := make([]byte, 300)
	if _, err := s.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after truncating and writing again: %v", err)
	}
	// Truncating at a segment's start empties it but keeps it, so that
	// the closed segment before it is never written again.
	if err := s.Truncate(90); err != nil {
		t.Fatal(err)
	}
	if ids, _ := l.List(); len(ids) != 2 || s.Active() != (ID{Start: 90}) {
		t.Fatalf("after Truncate(90): %+v, active %+v; want turns.log and an empty active segment at 90", ids, s.Active())
	}
	if err := s.Write([]byte{1}, 90); err != nil || len(s.Segments()) != 2 {
		t.Fatalf("a write at 90: %v, %d segments; want it in the segment at 90", err, len(s.Segments()))
	}
}

func TestOpenRefusesSegmentsThatDoNotFit(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, l Layout)
	}{
		{"a segment missing in the middle", func(t *testing.T, l Layout) {
			t.Helper()
			if err := os.Remove(l.Path(ID{Start: 90})); err != nil {
				t.Fatal(err)
			}
		}},
		{"a closed segment longer than the distance to the next", func(t *testing.T, l Layout) {
			t.Helper()
			f, err := os.OpenFile(l.Path(ID{Start: 90}), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte{0})
			f.Close()
		}},
		{"the first segment missing", func(t *testing.T, l Layout) {
			t.Helper()
			if err := os.Remove(l.Path(ID{})); err != nil {
				t.Fatal(err)
			}
		}},
		{"two generations of one segment", func(t *testing.T, l Layout) {
			t.Helper()
			if err := os.WriteFile(l.Path(ID{Start: 90, Gen: 1}), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := Layout{Dir: t.TempDir(), Base: "turns.log"}
			s := openSet(t, l, Options{MaxSize: 100})
			stream(t, s, 0, 10)
			s.Close()
			c.damage(t, l)
			before, _ := os.ReadDir(l.Dir)
			if _, err := Open(l, Options{MaxSize: 100}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			after, _ := os.ReadDir(l.Dir)
			if len(before) != len(after) {
				t.Fatalf("Open changed the directory: %d files before, %d after", len(before), len(after))
			}
		})
	}
}

func TestSumIsBLAKE3OfTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := bytes.Repeat([]byte("cardbox"), 400_000) // more than one read
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum, n, err := Sum(context.Background(), path)
	if err != nil || n != int64(len(data)) || sum != blake3.Sum256(data) {
		t.Fatalf("Sum = %x, %d, %v; want %x, %d", sum, n, err, blake3.Sum256(data), len(data))
	}
}
