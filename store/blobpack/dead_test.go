package blobpack

import (
	"bytes"
	"slices"
	"testing"
)

// The extents of a first storer's blobs, or of given hashes, are where
// their records lie; Rollover closes the active segment at the pack's
// end, not an empty one, and the next put goes to the new segment;
// VerifyContent tells each blob's bytes, uncompressed.
func TestExtentsRolloverVerifyContent(t *testing.T) {
	dir := t.TempDir()
	p := openPack(t, dir, Options{SegmentSize: 1 << 20})
	a, b, c := randBytes(1, 300), uniqueText(2, 4000), randBytes(3, 100)
	res := put(t, p, item(a, 7), item(b, 8), item(c, 7))
	owned := p.ExtentsOwnedBy(func(o uint32) bool { return o == 7 })
	slices.SortFunc(owned, func(x, y Extent) int { return int(x.Offset - y.Offset) })
	want := []Extent{
		{Offset: res[0].Entry.Offset, Size: res[0].Entry.recordSize(), Owner: 7},
		{Offset: res[2].Entry.Offset, Size: res[2].Entry.recordSize(), Owner: 7},
	}
	if !slices.Equal(owned, want) {
		t.Errorf("ExtentsOwnedBy(7): %+v, want %+v", owned, want)
	}
	if got := p.ExtentsOf([]Hash{hashOf(b), hashOf([]byte("not stored"))}); len(got) != 1 || got[0].Owner != 8 || got[0].Offset != res[1].Entry.Offset {
		t.Errorf("ExtentsOf: %+v; want b's record only", got)
	}

	end := p.Stats().PackBytes
	if rolled, err := p.Rollover(); err != nil || !rolled {
		t.Fatalf("Rollover: %v, %v; want a segment closed", rolled, err)
	}
	if rolled, err := p.Rollover(); err != nil || rolled {
		t.Fatalf("Rollover of an empty active segment: %v, %v; want nothing closed", rolled, err)
	}
	closed := p.Closed()
	if len(closed) != 1 || closed[0].Length != end {
		t.Fatalf("closed segments %+v; want one of %d bytes", closed, end)
	}
	d := randBytes(4, 200)
	if r := put(t, p, item(d, 9)); r[0].Entry.Offset != end {
		t.Errorf("the put after the rollover went to %d, want the new segment's start %d", r[0].Entry.Offset, end)
	}
	closePack(t, p)

	got := map[Hash][]byte{}
	defects, err := VerifyContent(dir, func(e Entry, raw []byte) { got[e.Hash] = bytes.Clone(raw) }, nil)
	if err != nil || len(defects) > 0 {
		t.Fatalf("VerifyContent: %v, %v", defects, err)
	}
	for _, data := range [][]byte{a, b, c, d} {
		if !bytes.Equal(got[hashOf(data)], data) {
			t.Errorf("VerifyContent told %d bytes for a blob of %d", len(got[hashOf(data)]), len(data))
		}
	}
	if len(got) != 4 {
		t.Errorf("VerifyContent told %d blobs, want 4", len(got))
	}
}
