package blobpack

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// fixture is a closed pack whose last Put stored one blob, last.
type fixture struct {
	dir      string
	base     [][]byte // blobs stored before last
	last     []byte
	lastFrom int64 // pack size before last
	lastTo   int64 // pack size after last
}

func newFixture(t *testing.T, last []byte) fixture {
	t.Helper()
	f := fixture{dir: t.TempDir(), last: last}
	p := openPack(t, f.dir, Options{})
	for b := range 3 {
		var items []PutItem
		for i := range 10 {
			data := uniqueText(uint64(b*10+i), 100+i*97)
			if i%4 == 0 {
				data = randBytes(uint64(b*10+i), 150)
			}
			f.base = append(f.base, data)
			items = append(items, item(data, 1))
		}
		put(t, p, items...)
	}
	f.lastFrom = p.Stats().PackBytes
	put(t, p, item(last, 2))
	f.lastTo = p.Stats().PackBytes
	closePack(t, p)
	return f
}

func (f fixture) pack(dir string) string { return filepath.Join(dir, PackFile) }
func (f fixture) idx(dir string) string  { return filepath.Join(dir, IndexFile) }

// checkLastDropped opens dir and checks that exactly the last blob is gone.
func (f fixture) checkLastDropped(t *testing.T, dir string) Recovery {
	t.Helper()
	p := openPack(t, dir, Options{})
	checkBlobs(t, p, f.base...)
	if _, err := p.Read(hashOf(f.last)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read(last) = %v, want ErrNotFound", err)
	}
	if s := p.Stats(); s.Blobs != len(f.base) || s.PackBytes != f.lastFrom {
		t.Fatalf("Stats = %+v, want %d blobs in %d bytes", s, len(f.base), f.lastFrom)
	}
	if got := sizeOf(t, f.pack(dir)); got != f.lastFrom {
		t.Fatalf("pack file is %d bytes, want %d", got, f.lastFrom)
	}
	if got, want := sizeOf(t, f.idx(dir)), int64(len(f.base)*idxEntrySize); got != want {
		t.Fatalf("index file is %d bytes, want %d", got, want)
	}
	// The pack is usable: the dropped blob can be stored again.
	put(t, p, item(f.last, 3))
	checkBlobs(t, p, f.last)
	closePack(t, p)
	return p.Recovery()
}

func TestTornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		last []byte
	}{
		{"small raw", []byte("the last blob")},
		{"zstd", textBytes(3000)},
		{"large", randBytes(9, 1<<20)},
	} {
		f := newFixture(t, tc.last)
		for _, keepIdx := range []bool{true, false} {
			for _, cut := range offsetsIn(f.lastFrom, f.lastTo) {
				dir := copyDir(t, f.dir)
				if err := os.Truncate(f.pack(dir), cut); err != nil {
					t.Fatal(err)
				}
				if !keepIdx {
					os.Remove(f.idx(dir))
				}
				r := f.checkLastDropped(t, dir)
				if r.TornBytes != cut-f.lastFrom {
					t.Fatalf("%s, idx %v, cut at %d: TornBytes = %d, want %d", tc.name, keepIdx, cut, r.TornBytes, cut-f.lastFrom)
				}
				if keepIdx && r.IndexDropped != idxEntrySize {
					t.Fatalf("%s, cut at %d: IndexDropped = %d, want one entry", tc.name, cut, r.IndexDropped)
				}
				os.RemoveAll(dir)
			}
		}
	}
}

func TestFlippedByteInLastRecord(t *testing.T) {
	f := newFixture(t, textBytes(2000))
	for _, keepIdx := range []bool{true, false} {
		for _, off := range offsetsIn(f.lastFrom, f.lastTo) {
			dir := copyDir(t, f.dir)
			flipByte(t, f.pack(dir), off)
			if !keepIdx {
				os.Remove(f.idx(dir))
			}
			if r := f.checkLastDropped(t, dir); r.TornBytes != f.lastTo-f.lastFrom {
				t.Fatalf("idx %v, flip at %d: TornBytes = %d, want %d", keepIdx, off, r.TornBytes, f.lastTo-f.lastFrom)
			}
			os.RemoveAll(dir)
		}
	}
}

func TestIndexRecovery(t *testing.T) {
	f := newFixture(t, textBytes(700))
	all := append(append([][]byte{}, f.base...), f.last)
	n := int64(len(all))
	tests := []struct {
		name        string
		damage      func(t *testing.T, dir string)
		wantIndexed int
		wantDropped int64
	}{
		{"intact", func(*testing.T, string) {}, len(all), 0},
		{"missing", func(t *testing.T, dir string) { t.Helper(); os.Remove(f.idx(dir)) }, 0, 0},
		{"empty", func(t *testing.T, dir string) { t.Helper(); os.Truncate(f.idx(dir), 0) }, 0, 0},
		{"truncated mid-entry", func(t *testing.T, dir string) {
			t.Helper()
			os.Truncate(f.idx(dir), 7*idxEntrySize+30)
		}, 7, 30},
		{"corrupt entry", func(t *testing.T, dir string) {
			t.Helper()
			flipByte(t, f.idx(dir), 12*idxEntrySize+40)
		}, 12, (n - 12) * idxEntrySize},
		{"garbage appended", func(t *testing.T, dir string) {
			t.Helper()
			appendFile(t, f.idx(dir), randBytes(5, 3*idxEntrySize))
		}, len(all), 3 * idxEntrySize},
		{"all garbage", func(t *testing.T, dir string) {
			t.Helper()
			os.WriteFile(f.idx(dir), randBytes(6, int(n)*idxEntrySize), 0o644)
		}, 0, n * idxEntrySize},
		{"entry duplicated", func(t *testing.T, dir string) {
			t.Helper()
			b := readFile(t, f.idx(dir))
			appendFile(t, f.idx(dir), b[len(b)-idxEntrySize:])
		}, len(all), idxEntrySize},
		{"from another pack", func(t *testing.T, dir string) {
			t.Helper()
			other := t.TempDir()
			p := openPack(t, other, Options{})
			for _, data := range all {
				alt := bytes.Clone(data)
				alt[len(alt)/2] ^= 1 // same sizes, different hashes
				put(t, p, item(alt, 1))
			}
			closePack(t, p)
			copyFile(t, f.idx(other), f.idx(dir))
		}, 0, n * idxEntrySize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyDir(t, f.dir)
			tt.damage(t, dir)
			p := openPack(t, dir, Options{})
			want := Recovery{Indexed: tt.wantIndexed, Scanned: len(all) - tt.wantIndexed, IndexDropped: tt.wantDropped}
			if r := p.Recovery(); r != want {
				t.Errorf("Recovery = %+v, want %+v", r, want)
			}
			checkBlobs(t, p, all...)
			closePack(t, p)
			if got := sizeOf(t, f.idx(dir)); got != n*idxEntrySize {
				t.Errorf("rebuilt index is %d bytes, want %d", got, n*idxEntrySize)
			}
			p = openPack(t, dir, Options{})
			if r := p.Recovery(); r != (Recovery{Indexed: len(all)}) {
				t.Errorf("second Recovery = %+v, want all indexed", r)
			}
		})
	}
}

func TestIndexAheadOfPack(t *testing.T) {
	f := newFixture(t, textBytes(700))
	p := openPack(t, f.dir, Options{})
	cutAt, _ := p.Lookup(hashOf(f.base[20]))
	closePack(t, p)

	dir := copyDir(t, f.dir)
	if err := os.Truncate(f.pack(dir), cutAt.Offset); err != nil { // a record boundary
		t.Fatal(err)
	}
	p = openPack(t, dir, Options{})
	want := Recovery{Indexed: 20, IndexDropped: int64(len(f.base)+1-20) * idxEntrySize}
	if r := p.Recovery(); r != want {
		t.Errorf("Recovery = %+v, want %+v", r, want)
	}
	checkBlobs(t, p, f.base[:20]...)
	for _, data := range append(f.base[20:], f.last) {
		if _, ok := p.Lookup(hashOf(data)); ok {
			t.Fatalf("blob past the end of the pack is indexed")
		}
	}
}

func TestMinValidSize(t *testing.T) {
	f := newFixture(t, textBytes(700))
	p := openPack(t, f.dir, Options{})
	early, _ := p.Lookup(hashOf(f.base[3]))
	closePack(t, p)
	committed := Options{MinValidSize: f.lastTo}

	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		opts   Options
		// wantErr: Open refuses and leaves the pack as it was. Otherwise
		// the pack keeps every committed byte and holes are its holes.
		wantErr bool
		holes   []Hole
	}{
		{"torn tail above min", func(t *testing.T, dir string) { t.Helper(); os.Truncate(f.pack(dir), f.lastTo-1) },
			Options{MinValidSize: f.lastFrom}, false, nil},
		{"torn tail below min", func(t *testing.T, dir string) { t.Helper(); os.Truncate(f.pack(dir), f.lastTo-1) },
			committed, true, nil},
		{"early corruption, no index", func(t *testing.T, dir string) {
			t.Helper()
			flipByte(t, f.pack(dir), early.Offset+headerSize)
			os.Remove(f.idx(dir))
		}, committed, false, []Hole{{Offset: early.Offset, End: early.end()}}},
		{"early header corruption", func(t *testing.T, dir string) { t.Helper(); flipByte(t, f.pack(dir), early.Offset+offRawLen) },
			committed, false, []Hole{{Offset: early.Offset, End: early.end(), Hash: early.Hash, HashKnown: true, Owner: early.Owner}}},
		{"early magic corruption", func(t *testing.T, dir string) { t.Helper(); flipByte(t, f.pack(dir), early.Offset) },
			committed, false, []Hole{{Offset: early.Offset, End: early.end(), Hash: early.Hash, HashKnown: true, Owner: early.Owner}}},
		{"early payload corruption", func(t *testing.T, dir string) { t.Helper(); flipByte(t, f.pack(dir), early.Offset+headerSize) },
			committed, false, []Hole{{Offset: early.Offset, End: early.end(), Hash: early.Hash, HashKnown: true, Owner: early.Owner}}},
		{"early corruption, no committed end", func(t *testing.T, dir string) {
			t.Helper()
			flipByte(t, f.pack(dir), early.Offset+headerSize)
			os.Remove(f.idx(dir))
		}, Options{}, false, []Hole{{Offset: early.Offset, End: early.end()}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyDir(t, f.dir)
			tt.damage(t, dir)
			before := readFile(t, f.pack(dir))
			p, err := Open(dir, tt.opts)
			if tt.wantErr {
				if !errors.Is(err, ErrCorrupt) {
					if err == nil {
						p.Close()
					}
					t.Fatalf("Open = %v, want ErrCorrupt", err)
				}
				if !bytes.Equal(readFile(t, f.pack(dir)), before) {
					t.Fatalf("Open modified the pack")
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer p.Close()
			checkHoles(t, p, tt.holes)
			if len(tt.holes) == 0 {
				return
			}
			if after := readFile(t, f.pack(dir)); !bytes.Equal(after[:f.lastTo], before[:f.lastTo]) {
				t.Fatalf("Open changed committed bytes of the pack")
			}
			var rest [][]byte
			for i, data := range f.base {
				if i != 3 {
					rest = append(rest, data)
				}
			}
			checkBlobs(t, p, append(rest, f.last)...)
			_, err = p.Read(early.Hash)
			if !tt.holes[0].HashKnown {
				return
			}
			var d *DamageError
			if !errors.As(err, &d) || !errors.Is(err, ErrDamaged) || d.Hash != early.Hash || d.Offset != early.Offset || d.End != early.end() {
				t.Fatalf("Read of the damaged blob = %v, want a DamageError naming its record %d..%d", err, early.Offset, early.end())
			}
			if h, ok := p.HoleOf(early.Hash); !ok || h.Offset != early.Offset || h.Owner != early.Owner {
				t.Fatalf("HoleOf the damaged blob = %+v, %v; want its hole, with its owner", h, ok)
			}
		})
	}
}

// checkHoles compares the pack's holes with want, ignoring reasons.
func checkHoles(t *testing.T, p *Pack, want []Hole) {
	t.Helper()
	got := p.Holes()
	for i := range got {
		got[i].Reason = ""
	}
	if !slices.Equal(got, want) {
		t.Fatalf("holes = %+v, want %+v", got, want)
	}
}

func TestOpenLocks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("flock is used on Linux only")
	}
	dir := t.TempDir()
	openPack(t, dir, Options{})
	if p, err := Open(dir, Options{}); err == nil {
		p.Close()
		t.Fatal("second Open of a locked pack succeeded")
	}
}

// offsetsIn returns offsets in [from, to): every one in the first 64 and
// last 8 bytes (header and trailer), and about 50 of the bytes between.
func offsetsIn(from, to int64) []int64 {
	stride := max(7, (to-from)/50)
	var offs []int64
	for off := from; off < to; {
		offs = append(offs, off)
		if off-from < 64 || to-off <= 9 {
			off++
		} else {
			off = min(off+stride, to-8)
		}
	}
	return offs
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
