package blobpack

import (
	"os"
	"testing"
)

// A pack of small segments stores, reads, recovers and verifies as one:
// offsets are logical, records never span two segments, and blobs.idx
// (rebuilt here by scanning) names them across segments.
func TestSegmentedPack(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 4 << 10, Reserve: 64 << 10}
	p := openPack(t, dir, opts)
	var blobs [][]byte
	for i := range 40 {
		b := randBytes(uint64(i), 300+i*10)
		blobs = append(blobs, b)
		put(t, p, item(b, 1))
	}
	segs := p.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments, want several of 4 KiB", len(segs))
	}
	for _, s := range p.Closed() {
		if s.Length > opts.SegmentSize || sizeOf(t, s.Path) != s.Length {
			t.Fatalf("closed segment %+v: %d bytes on disk, want its length, at most %d", s, sizeOf(t, s.Path), opts.SegmentSize)
		}
	}
	checkBlobs(t, p, blobs...)
	end := p.Stats().PackBytes
	closePack(t, p)

	if err := os.Remove(dir + "/" + IndexFile); err != nil {
		t.Fatal(err)
	}
	p = openPack(t, dir, Options{SegmentSize: opts.SegmentSize, MinValidSize: end})
	if r := p.Recovery(); r.Scanned != len(blobs) || r.TornBytes != 0 {
		t.Fatalf("recovery without blobs.idx: %+v, want %d scanned", r, len(blobs))
	}
	checkBlobs(t, p, blobs...)
	closePack(t, p)

	var seen int
	defects, err := Verify(dir, func(Entry) { seen++ }, nil)
	if err != nil || len(defects) != 0 || seen != len(blobs) {
		t.Fatalf("Verify: %d blobs, defects %v, %v", seen, defects, err)
	}
}
