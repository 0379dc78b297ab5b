package blobpack

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

func TestPutReadRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		data      []byte
		wantCodec Codec
	}{
		{"empty", []byte{}, CodecRaw},
		{"small raw", []byte("a small blob"), CodecRaw},
		{"compressible", textBytes(10_000), CodecZstd},
		{"incompressible", randBytes(1, 10_000), CodecRaw},
		{"big compressible", textBytes(3 << 20), CodecZstd},
	}
	p := openPack(t, t.TempDir(), Options{VerifyHashes: true})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := put(t, p, item(tt.data, 5))
			e := res[0].Entry
			if !res[0].New || e.Codec != tt.wantCodec || e.RawLen != uint32(len(tt.data)) || e.Owner != 5 {
				t.Fatalf("Put = %+v, want new %v blob of %d bytes owned by 5", res[0], tt.wantCodec, len(tt.data))
			}
			if e.Codec == CodecZstd && e.StoredLen >= e.RawLen {
				t.Fatalf("zstd blob stored in %d bytes, raw %d", e.StoredLen, e.RawLen)
			}
			if got, ok := p.Lookup(e.Hash); !ok || got != e {
				t.Fatalf("Lookup = %+v, %v; want %+v", got, ok, e)
			}
			checkBlobs(t, p, tt.data)
			got, err := p.ReadEntry(e)
			if err != nil || !bytes.Equal(got, tt.data) {
				t.Fatalf("ReadEntry: %v", err)
			}
		})
	}
}

func TestPutExistingWritesNothing(t *testing.T) {
	dir := t.TempDir()
	p := openPack(t, dir, Options{})
	a, b := textBytes(1000), randBytes(2, 500)
	first := put(t, p, item(a, 1), item(b, 1))
	packSize, idxSize := sizeOf(t, filepath.Join(dir, PackFile)), sizeOf(t, filepath.Join(dir, IndexFile))

	again := put(t, p, item(b, 2), item(a, 2))
	for i, want := range []Entry{first[1].Entry, first[0].Entry} {
		if again[i].New || again[i].Entry != want {
			t.Errorf("second Put[%d] = %+v, want existing %+v", i, again[i], want)
		}
	}
	if got := sizeOf(t, filepath.Join(dir, PackFile)); got != packSize {
		t.Errorf("pack grew from %d to %d", packSize, got)
	}
	if got := sizeOf(t, filepath.Join(dir, IndexFile)); got != idxSize {
		t.Errorf("index grew from %d to %d", idxSize, got)
	}
	if s := p.Stats(); s.Blobs != 2 || s.PackBytes != packSize || s.RawBytes != int64(len(a)+len(b)) {
		t.Errorf("Stats = %+v", s)
	}
}

func TestPutDedupesWithinBatch(t *testing.T) {
	p := openPack(t, t.TempDir(), Options{})
	a, b := textBytes(300), []byte("b")
	res := put(t, p, item(a, 1), item(b, 2), item(a, 3), item(a, 4))
	wantNew := []bool{true, true, false, false}
	for i, r := range res {
		if r.New != wantNew[i] {
			t.Errorf("result %d: New = %v, want %v", i, r.New, wantNew[i])
		}
	}
	if res[2].Entry != res[0].Entry || res[3].Entry != res[0].Entry || res[0].Entry.Owner != 1 {
		t.Errorf("repeats got %+v and %+v, want %+v", res[2].Entry, res[3].Entry, res[0].Entry)
	}
	if got, want := p.Stats().PackBytes, res[0].Entry.recordSize()+res[1].Entry.recordSize(); got != want {
		t.Errorf("pack has %d bytes, want %d", got, want)
	}
}

// TestStageKnowsTheEnd checks that Stage says where the pack will end
// before anything is written, and that Write refuses a batch staged before
// the pack changed, writing nothing of it.
func TestStageKnowsTheEnd(t *testing.T) {
	p := openPack(t, t.TempDir(), Options{})
	put(t, p, item([]byte("first"), 1))
	a, b := item(uniqueText(1, 900), 1), item(randBytes(2, 700), 1)
	st, err := p.Stage([]PutItem{a, b, a})
	if err != nil {
		t.Fatal(err)
	}
	before := p.Stats().PackBytes
	if _, ok := p.Lookup(a.Hash); ok || st.End <= before {
		t.Fatalf("staged: End %d after %d, visible %v; want a later end and nothing visible", st.End, before, ok)
	}
	res, err := p.Write(st)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Stats().PackBytes; got != st.End {
		t.Errorf("pack ends at %d after Write, Stage said %d", got, st.End)
	}
	if !res[0].New || !res[1].New || res[2].New || res[2].Entry != res[0].Entry {
		t.Errorf("results %+v: want two new blobs and a repeat of the first", res)
	}

	stale, err := p.Stage([]PutItem{item([]byte("late"), 1)})
	if err != nil {
		t.Fatal(err)
	}
	put(t, p, item([]byte("meanwhile"), 2))
	size := p.Stats().PackBytes
	if _, err := p.Write(stale); !errors.Is(err, ErrStale) {
		t.Fatalf("Write after the pack changed: %v, want ErrStale", err)
	}
	if _, ok := p.Lookup(hashOf([]byte("late"))); ok || p.Stats().PackBytes != size {
		t.Errorf("a refused Write left its blob visible (%v) or grew the pack (%d → %d)", ok, size, p.Stats().PackBytes)
	}
}

func TestPutPreEncoded(t *testing.T) {
	p := openPack(t, t.TempDir(), Options{VerifyHashes: true})
	blobs := [][]byte{[]byte("tiny"), textBytes(5000), randBytes(4, 3000)}
	var items []PutItem
	for _, data := range blobs {
		it := item(data, 1)
		it.Stored, it.Codec = Encode(data)
		items = append(items, it)
	}
	res := put(t, p, items...)
	for i, r := range res {
		if r.Entry.Codec != items[i].Codec || r.Entry.StoredLen != uint32(len(items[i].Stored)) {
			t.Errorf("blob %d stored as %+v, want the caller's encoding", i, r.Entry)
		}
	}
	checkBlobs(t, p, blobs...)
}

func TestPutRejects(t *testing.T) {
	withStored := func(data, stored []byte, c Codec) PutItem {
		it := item(data, 0)
		it.Stored, it.Codec = stored, c
		return it
	}
	text := textBytes(1000)
	zText, _ := Encode(text)
	tests := []struct {
		name  string
		opts  Options
		items []PutItem
		want  error
	}{
		{"too large", Options{MaxBlobSize: 100}, []PutItem{item([]byte("ok"), 0), item(make([]byte, 101), 0)}, ErrTooLarge},
		{"hash mismatch", Options{VerifyHashes: true}, []PutItem{item([]byte("ok"), 0), {Hash: hashOf([]byte("x")), Data: []byte("y")}}, ErrHashMismatch},
		{"stored form of other data", Options{VerifyHashes: true}, []PutItem{withStored(textBytes(999), zText, CodecZstd)}, ErrHashMismatch},
		{"raw stored form too short", Options{}, []PutItem{withStored(text, text[1:], CodecRaw)}, nil},
		{"unknown codec", Options{}, []PutItem{withStored(text, zText, 7)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := openPack(t, t.TempDir(), tt.opts)
			_, err := p.Put(tt.items)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("Put = %v, want %v", err, tt.want)
			}
			if s := p.Stats(); s.Blobs != 0 || s.PackBytes != 0 {
				t.Fatalf("rejected batch left %+v", s)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	p := openPack(t, t.TempDir(), Options{})
	e := put(t, p, item(textBytes(1000), 1))[0].Entry
	if _, err := p.Read(hashOf([]byte("absent"))); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read(absent) = %v, want ErrNotFound", err)
	}
	bad := e
	bad.Owner++
	if _, err := p.ReadEntry(bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ReadEntry(wrong owner) = %v, want ErrCorrupt", err)
	}
	bad = e
	bad.Offset += 1 << 20
	if _, err := p.ReadEntry(bad); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadEntry(past end) = %v, want ErrNotFound", err)
	}
	closePack(t, p)
	if _, err := p.Read(e.Hash); !errors.Is(err, ErrClosed) {
		t.Errorf("Read after Close = %v, want ErrClosed", err)
	}
	if _, err := p.Put([]PutItem{item([]byte("x"), 0)}); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close = %v, want ErrClosed", err)
	}
}

func TestReadDetectsCorruption(t *testing.T) {
	dir := t.TempDir()
	p := openPack(t, dir, Options{})
	data := textBytes(5000)
	e := put(t, p, item(data, 1))[0].Entry
	put(t, p, item(randBytes(3, 2<<20), 1)) // pushes e out of the verified tail
	closePack(t, p)
	flipByte(t, filepath.Join(dir, PackFile), e.Offset+headerSize+10)

	var told []Hole
	p = openPack(t, dir, Options{OnDamage: func(h Hole) { told = append(told, h) }})
	if len(p.Holes()) != 0 {
		t.Fatalf("Open found holes %+v; the damage lies outside what it verifies", p.Holes())
	}
	_, err := p.Read(e.Hash)
	var d *DamageError
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrDamaged) || !errors.As(err, &d) || d.Offset != e.Offset || d.End != e.end() {
		t.Fatalf("Read of damaged record = %v, want ErrCorrupt and a DamageError naming its record %d..%d", err, e.Offset, e.end())
	}
	// The record is a hole now, told once, however often it is read.
	want := Hole{Offset: e.Offset, End: e.end(), Hash: e.Hash, HashKnown: true, Owner: e.Owner, Reason: d.Reason, FoundOnRead: true}
	for range 3 {
		_, err = p.View(e.Hash)
		if !errors.As(err, &d) || !errors.Is(err, ErrDamaged) || d.Offset != e.Offset || d.End != e.end() {
			t.Fatalf("a later read = %v, want a DamageError naming the hole %d..%d", err, e.Offset, e.end())
		}
	}
	if h, ok := p.HoleOf(e.Hash); !ok || h != want {
		t.Fatalf("HoleOf = %+v, %v; want %+v", h, ok, want)
	}
	if got := p.Holes(); len(got) != 1 || got[0] != want || len(told) != 1 || told[0] != want {
		t.Fatalf("holes %+v, OnDamage told %+v; want %+v once", got, told, want)
	}
	if _, ok := p.Lookup(e.Hash); ok || !errors.Is(p.Has(e.Hash), ErrDamaged) {
		t.Fatalf("Lookup found the damaged record, or Has = %v", p.Has(e.Hash))
	}
	// An entry the index does not hold (another owner) makes no hole.
	other := put(t, p, item(textBytes(3000), 2))[0].Entry
	bad := other
	bad.Owner++
	if _, err := p.ReadEntry(bad); !errors.Is(err, ErrCorrupt) || len(p.Holes()) != 1 {
		t.Fatalf("ReadEntry(wrong owner) = %v, holes %d; want ErrCorrupt and no new hole", err, len(p.Holes()))
	}

	// Storing the blob again heals it, and the new record wins when the
	// pack is opened again, though blobs.idx lists the damaged one first.
	if r := put(t, p, item(data, 4))[0]; !r.New || r.Entry.Offset <= e.Offset {
		t.Fatalf("Put of the damaged blob = %+v, want a new record", r)
	}
	checkBlobs(t, p, data)
	closePack(t, p)
	p = openPack(t, dir, Options{OnDamage: func(h Hole) { t.Errorf("told of %+v after the heal", h) }})
	checkBlobs(t, p, data)
	if got, _ := p.Lookup(e.Hash); got.Owner != 4 || p.OwnerBytes(1) != 2<<20 || p.OwnerBytes(4) != int64(len(data)) {
		t.Fatalf("after reopening: entry %+v, owner bytes %d and %d", got, p.OwnerBytes(1), p.OwnerBytes(4))
	}
	closePack(t, p)
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	p := openPack(t, dir, Options{})
	var all [][]byte
	for batch := range 5 {
		var items []PutItem
		for i := range 20 {
			data := uniqueText(uint64(batch*100+i), 200+i*50)
			if i%3 == 0 {
				data = randBytes(uint64(batch*100+i), 300)
			}
			all = append(all, data)
			items = append(items, item(data, uint32(batch)))
		}
		put(t, p, items...)
	}
	want := p.Stats()
	closePack(t, p)

	p = openPack(t, dir, Options{})
	if got := p.Stats(); got != want {
		t.Errorf("Stats after reopen = %+v, want %+v", got, want)
	}
	if r := p.Recovery(); r != (Recovery{Indexed: len(all)}) {
		t.Errorf("Recovery = %+v, want all %d indexed", r, len(all))
	}
	checkBlobs(t, p, all...)
	if e, _ := p.Lookup(hashOf(all[len(all)-1])); e.Owner != 4 {
		t.Errorf("owner = %d, want 4", e.Owner)
	}
}

func TestConcurrentReadsDuringPuts(t *testing.T) {
	p := openPack(t, t.TempDir(), Options{})
	const batches, perBatch = 40, 16
	var published atomic.Int64 // blobs with seq < published are stored
	blob := func(seq int64) []byte {
		if seq%2 == 0 {
			return randBytes(uint64(seq), 200)
		}
		return uniqueText(uint64(seq), 2000)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, 8)
	for r := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 0))
			for {
				select {
				case <-done:
					return
				default:
				}
				n := published.Load()
				if n == 0 {
					continue
				}
				data := blob(rng.Int64N(n))
				got, err := p.Read(hashOf(data))
				if err == nil && !bytes.Equal(got, data) {
					err = errors.New("read returned different bytes")
				}
				if err != nil {
					errc <- err
					return
				}
				_ = p.Stats()
			}
		})
	}
	for b := range batches {
		items := make([]PutItem, perBatch)
		for i := range items {
			items[i] = item(blob(int64(b*perBatch+i)), 1)
		}
		put(t, p, items...)
		published.Store(int64((b + 1) * perBatch))
	}
	close(done)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("concurrent Read: %v", err)
	}
}
