package blobpack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/cardboxhq/cardbox/store/segment"
)

// rewriteWithout writes the next generation of the closed segment at
// start without the records of drop, as a compaction does, and returns
// its id.
func rewriteWithout(t *testing.T, p *Pack, start int64, drop map[Hash]bool) segment.ID {
	t.Helper()
	var old segment.Info
	for _, s := range p.Closed() {
		if s.ID.Start == start {
			old = s
		}
	}
	id := segment.ID{Start: start, Gen: old.ID.Gen + 1}
	f, err := os.Create(Layout(p.dir).Path(id))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	if _, _, err := SegmentRecords(context.Background(), old.Path, start, func(raw []byte, e Entry) error {
		if drop[e.Hash] {
			return nil
		}
		_, err := w.Write(raw)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(w.Flush(), f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
	return id
}

// A compaction's view of the pack: a blob looked up after the compaction
// began is kept; a condemned one is hidden, so that storing it again
// writes a new record; Install makes the pack read the rewrite (live
// blobs at their new offsets, dropped ones gone, the one stored again at
// its new record), and blobs.idx then names the rewrite, so that the next
// Open scans nothing; without blobs.idx, the scan reads the rewrite and
// skips its gap.
func TestCompactionInstall(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := Options{SegmentSize: 4 << 10}
	p := openPack(t, dir, opts)
	var blobs [][]byte
	for i := range 40 {
		b := randBytes(uint64(i), 300+i*10)
		blobs = append(blobs, b)
		put(t, p, item(b, 1))
	}
	first := p.Closed()[0]
	var inFirst []Hash
	if _, _, err := SegmentRecords(ctx, first.Path, 0, func(_ []byte, e Entry) error {
		inFirst = append(inFirst, e.Hash)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(inFirst) < 4 {
		t.Fatalf("%d blobs in the first segment", len(inFirst))
	}
	looked, again, gone := inFirst[0], inFirst[1], inFirst[2]

	end, err := p.BeginCompaction(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Lookup(looked); !ok {
		t.Fatal("lookup before condemning")
	}
	dropped, err := p.Condemn(map[Hash]bool{looked: true, again: true, gone: true})
	if err != nil {
		t.Fatal(err)
	}
	if dropped[looked] || !dropped[again] || !dropped[gone] {
		t.Fatalf("condemned %v: the blob looked up meanwhile must stay", dropped)
	}
	for _, h := range []Hash{again, gone} {
		if _, ok := p.Lookup(h); ok {
			t.Fatalf("a condemned blob %x is found", h[:4])
		}
	}
	var againData []byte
	for _, b := range blobs {
		if hashOf(b) == again {
			againData = b
		}
	}
	res := put(t, p, item(againData, 2))
	if !res[0].New || res[0].Entry.Offset < first.End() {
		t.Fatalf("storing a condemned blob again: %+v", res[0])
	}

	// A reader that looked a blob up before the install, whose record
	// moves.
	moving := inFirst[3]
	stale, _ := p.Lookup(moving)

	// Readers of every blob that stays, during the install.
	stop := make(chan struct{})
	failed := make(chan error, 4)
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for {
				for _, b := range blobs {
					if h := hashOf(b); h != gone {
						got, err := p.Read(h)
						if err != nil || !bytes.Equal(got, b) {
							failed <- fmt.Errorf("read %x during the install: %d bytes, %v", h[:4], len(got), err)
							return
						}
					}
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	rewrite := rewriteWithout(t, p, 0, dropped)
	old, err := p.Install(ctx, rewrite)
	end()
	close(stop)
	readers.Wait()
	close(failed)
	for err := range failed {
		t.Error(err)
	}
	if err != nil || old.ID != first.ID {
		t.Fatalf("install: %+v, %v", old, err)
	}
	if err := os.Remove(old.Path); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Lookup(gone); ok {
		t.Fatal("a dropped blob is found after the install")
	}
	if now, _ := p.Lookup(moving); now.Offset >= stale.Offset {
		t.Fatalf("a blob after dropped ones did not move: %d, then %d", stale.Offset, now.Offset)
	}
	if data, err := p.ReadEntry(stale); err == nil {
		t.Fatalf("a read at the offset before the install returns %d bytes", len(data))
	}
	if h := p.Holes(); len(h) != 0 {
		t.Fatalf("a stale read made holes: %v", h)
	}
	if e, ok := p.Lookup(again); !ok || e != res[0].Entry {
		t.Fatalf("the blob stored again: %+v, %v; want %+v", e, ok, res[0].Entry)
	}
	var live [][]byte
	for _, b := range blobs {
		if hashOf(b) != gone {
			live = append(live, b)
		}
	}
	checkBlobs(t, p, live...)
	if got := p.Stats().Blobs; got != len(live) {
		t.Errorf("%d blobs after the install, want %d", got, len(live))
	}
	closePack(t, p)

	p = openPack(t, dir, opts)
	if r := p.Recovery(); r.Scanned != 0 || r.IndexDropped != 0 {
		t.Errorf("open after the install: %+v: blobs.idx does not name the rewrite", r)
	}
	checkBlobs(t, p, live...)
	closePack(t, p)

	if err := os.Remove(dir + "/" + IndexFile); err != nil {
		t.Fatal(err)
	}
	p = openPack(t, dir, opts)
	if r := p.Recovery(); r.Scanned != len(live) || r.TornBytes != 0 || len(p.Holes()) != 0 {
		t.Errorf("open without blobs.idx: %+v, holes %v; want %d scanned", r, p.Holes(), len(live))
	}
	checkBlobs(t, p, live...)
	closePack(t, p)
	var seen int
	defects, err := Verify(dir, func(Entry) { seen++ }, nil)
	if err != nil || len(defects) != 0 || seen != len(live) {
		t.Fatalf("Verify: %d records, defects %v, %v", seen, defects, err)
	}
}
