package blobpack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/syncfile"
)

// What the pack does for a compaction of one of its sealed segments
// (package store/compact; docs/storage.md, Compaction). The compaction
// reads the segment's file, asks which of its blobs are dead, writes the
// live records to the segment's next generation and swaps it in; the
// pack's part is to keep a blob that is stored again meanwhile, and to
// read the rewrite once it is swapped in:
//
//   - BeginCompaction watches the segment: from then on every lookup
//     that finds a blob there (a put or an append deduplicating against
//     it, a read) is remembered;
//   - Condemn takes the dead blobs that no lookup found since out of
//     the index's answers: Lookup says they are not stored, so a put or
//     an append of their bytes writes them again, as a new record in
//     the active segment, which the index then names; the compaction
//     drops only those;
//   - Install reads the swapped-in rewrite: the index names each live
//     blob's new offset, the dropped blobs are gone, and blobs.idx is
//     rewritten to match.

// watch is the segment a compaction rewrites and the blobs looked up in
// it since the compaction began.
type watch struct {
	start, next int64 // the segment's range of offsets
	mu          sync.Mutex
	hits        map[Hash]struct{}
}

func (w *watch) hit(e *Entry) {
	if e.Offset < w.start || e.Offset >= w.next {
		return
	}
	w.mu.Lock()
	w.hits[e.Hash] = struct{}{}
	w.mu.Unlock()
}

// condemnedLocked reports whether e is the record of a blob a compaction
// drops, which Lookup hides. The caller holds mu.
func (p *Pack) condemnedLocked(e *Entry) bool {
	if len(p.condemned) == 0 {
		return false
	}
	off, ok := p.condemned[e.Hash]
	return ok && off == e.Offset
}

// BeginCompaction starts watching the closed segment that starts at
// start for a compaction of it, and returns the function that stops
// watching. One compaction runs at a time.
func (p *Pack) BeginCompaction(start int64) (end func(), err error) {
	id, _, next, ok := p.pack.Span(start)
	if !ok || id.Start != start || next < 0 {
		return nil, fmt.Errorf("blobpack: compact: no closed segment starts at %d", start)
	}
	w := &watch{start: start, next: next, hits: map[Hash]struct{}{}}
	p.mu.Lock()
	p.watch = w
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if p.watch == w {
			p.watch = nil
		}
		p.mu.Unlock()
	}, nil
}

// Condemn decides which of dead, blobs of the watched segment that no
// one claims any more, the compaction drops: those no lookup found since
// BeginCompaction. From now on Lookup hides them (their records in the
// segment), so that a put or an append of their bytes writes them again.
// It replaces what an earlier Condemn of the segment decided.
func (p *Pack) Condemn(dead map[Hash]bool) (map[Hash]bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.watch
	if w == nil {
		return nil, errors.New("blobpack: condemn: no compaction began")
	}
	p.releaseLocked(w.start, w.next)
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[Hash]bool, len(dead))
	for h := range dead {
		if _, found := w.hits[h]; found {
			continue
		}
		out[h] = true
		if e, ok := p.index.lookup(&h); ok && e.Offset >= w.start && e.Offset < w.next {
			if p.condemned == nil {
				p.condemned = map[Hash]int64{}
			}
			p.condemned[h] = e.Offset
			if p.cache != nil {
				p.cache.drop(&h)
			}
		}
	}
	return out, nil
}

// Release ends what Condemn decided for the segment starting at start:
// its compaction ended before its swap.
func (p *Pack) Release(start int64) {
	_, _, next, ok := p.pack.Span(start)
	if !ok || next < 0 {
		return
	}
	p.mu.Lock()
	p.releaseLocked(start, next)
	p.mu.Unlock()
}

func (p *Pack) releaseLocked(start, next int64) {
	for h, off := range p.condemned {
		if off >= start && off < next {
			delete(p.condemned, h)
		}
	}
}

// SegmentRecords calls fn with each record of the pack's segment file at
// path, whose first byte is at offset start, in order, after checking its
// CRC; raw is the whole record (valid during the call). It returns the
// file's BLAKE3 and length. A bad or partial record is an error wrapping
// ErrCorrupt: a sealed segment holds whole, good records only.
func SegmentRecords(ctx context.Context, path string, start int64, fn func(raw []byte, e Entry) error) (sum [32]byte, length int64, err error) {
	return SegmentRecordsThrough(ctx, path, start, nil, fn)
}

// SegmentRecordsThrough is SegmentRecords reading the file through
// through(file) when through is not nil: a compaction's rate limit.
func SegmentRecordsThrough(ctx context.Context, path string, start int64, through func(io.Reader) io.Reader,
	fn func(raw []byte, e Entry) error) (sum [32]byte, length int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return sum, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return sum, 0, err
	}
	h := blake3.New()
	var src io.Reader = f
	if through != nil {
		src = through(f)
	}
	r := bufio.NewReaderSize(io.TeeReader(src, h), scanBufSize)
	end := start + fi.Size()
	var rec []byte
	for off, n := start, 0; off < end; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return sum, 0, err
			}
		}
		e, err := readRecord(r, off, end, &rec)
		if err != nil {
			return sum, 0, fmt.Errorf("%s: %w", path, err)
		}
		if err := fn(rec[:e.recordSize()], e); err != nil {
			return sum, 0, err
		}
		off = e.end()
	}
	if _, err := io.Copy(io.Discard, r); err != nil { // the hash covers every byte
		return sum, 0, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, fi.Size(), nil
}

// Install makes the pack read rewrite, a new generation of one of its
// closed segments, whose file the compaction wrote and fsynced and which
// Postgres names now. The index names each blob kept at its new offset,
// the blobs left out are gone (Lookup does not find them; one stored
// again since keeps its new record), and blobs.idx is rewritten to match
// (a process stopped before that finds blobs.idx naming the old
// generation, stops reading it there and scans the pack instead). It
// returns the generation replaced, whose file is closed and left for the
// caller to remove.
func (p *Pack) Install(ctx context.Context, rewrite segment.ID) (segment.Info, error) {
	var old segment.Info
	for _, seg := range p.pack.Closed() {
		if seg.ID.Start == rewrite.Start {
			old = seg
		}
	}
	if old.Path == "" {
		return old, fmt.Errorf("blobpack: install %s: no closed segment starts at %d", Layout(p.dir).Name(rewrite), rewrite.Start)
	}
	var olds, news []Entry
	if _, _, err := SegmentRecords(ctx, old.Path, old.ID.Start, func(_ []byte, e Entry) error {
		olds = append(olds, e)
		return nil
	}); err != nil {
		return old, fmt.Errorf("blobpack: install: read %s: %w", old.Path, err)
	}
	newPath := Layout(p.dir).Path(rewrite)
	if _, _, err := SegmentRecords(ctx, newPath, rewrite.Start, func(_ []byte, e Entry) error {
		news = append(news, e)
		return nil
	}); err != nil {
		return old, fmt.Errorf("blobpack: install: read %s: %w", newPath, err)
	}
	// The rewrite holds the old records in order, less those of the
	// blobs dropped (every record of such a blob).
	moved := make(map[int64]Entry, len(news))
	j := 0
	for _, e := range olds {
		if j < len(news) && news[j].Hash == e.Hash {
			moved[e.Offset] = news[j]
			j++
		}
	}
	if j != len(news) {
		return old, fmt.Errorf("blobpack: install: %s does not hold %s's records in order: %w", newPath, old.Path, ErrCorrupt)
	}

	p.mu.Lock()
	replaced, err := p.pack.Replace(rewrite)
	if err != nil {
		p.mu.Unlock()
		return replaced, fmt.Errorf("blobpack: install: %w", err)
	}
	_, _, next, _ := p.pack.Span(rewrite.Start)
	for _, e := range olds {
		cur, ok := p.index.lookup(&e.Hash)
		if !ok || cur.Offset != e.Offset {
			continue // stored again since, or an earlier record of it
		}
		if n, kept := moved[e.Offset]; kept {
			p.index.replace(&n)
			continue
		}
		p.index.remove(&e.Hash)
		p.rawBytes -= int64(cur.RawLen)
		p.ownerBytes[cur.Owner] -= int64(cur.RawLen)
		if p.cache != nil {
			p.cache.drop(&e.Hash)
		}
	}
	p.releaseLocked(rewrite.Start, next)
	p.dropHolesLocked(rewrite.Start, next)
	p.mu.Unlock()

	if err := p.rewriteIndex(rewrite.Start, next, news); err != nil {
		// blobs.idx still names the old generation: the next Open stops
		// reading it there and scans the pack.
		p.wmu.Lock()
		if p.idxErr == nil {
			p.mu.Lock()
			p.idxErr = err
			p.mu.Unlock()
		}
		p.wmu.Unlock()
	}
	return replaced, nil
}

// dropHolesLocked forgets the holes in [start, next): a compaction
// rewrote the segment from good records only. The caller holds mu.
func (p *Pack) dropHolesLocked(start, next int64) {
	kept := p.holes[:0]
	for _, h := range p.holes {
		if h.Offset < start || h.Offset >= next {
			kept = append(kept, h)
		}
	}
	p.holes = kept
	p.holeByHash = nil
	for i, h := range p.holes {
		if h.HashKnown {
			if p.holeByHash == nil {
				p.holeByHash = map[Hash]int{}
			}
			p.holeByHash[h.Hash] = i
		}
	}
}

// idxFlushStep is how many bytes of the new blobs.idx rewriteIndex
// writes before it hands them to the disk (syncfile.Trickle).
const idxFlushStep = 1 << 20

// compactedIndexFile is where rewriteIndex writes the new blobs.idx
// before renaming it over the old one.
const compactedIndexFile = IndexFile + ".compacted"

// rewriteIndex rewrites blobs.idx with the entries of [start, next)
// replaced by news: a copy, renamed over it. The entries before the
// point the copy read without holding up Put are copied without it;
// those Put appended meanwhile, under its lock.
func (p *Pack) rewriteIndex(start, next int64, news []Entry) error {
	p.wmu.Lock()
	stop, size := p.idxErr != nil || p.closed.Load(), p.idxSize
	p.wmu.Unlock()
	if stop {
		return nil // the next Open rebuilds it
	}
	path := filepath.Join(p.dir, compactedIndexFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("blobpack: rewrite %s: %w", IndexFile, err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(path)
		}
	}()
	// The copy goes to the disk a step at a time as it is written, and
	// what was copied without the lock is flushed before it is taken:
	// the fsync under the lock, which holds up every Put, then finds
	// only the entries Put appended meanwhile to flush, not the whole
	// index.
	c := &idxCopy{w: bufio.NewWriterSize(syncfile.NewTrickle(f, 0, idxFlushStep), scanBufSize), start: start, next: next, news: news}
	if err := c.copy(p.idx, 0, size); err != nil {
		return fmt.Errorf("blobpack: rewrite %s: %w", IndexFile, err)
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("blobpack: rewrite %s: %w", IndexFile, err)
	}
	if err := syncfile.Data(f); err != nil {
		return fmt.Errorf("blobpack: rewrite %s: sync: %w", IndexFile, err)
	}

	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.idxErr != nil || p.closed.Load() {
		return nil
	}
	if err := c.copy(p.idx, size, p.idxSize); err != nil {
		return fmt.Errorf("blobpack: rewrite %s: %w", IndexFile, err)
	}
	if err := c.flush(); err != nil {
		return fmt.Errorf("blobpack: rewrite %s: %w", IndexFile, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("blobpack: rewrite %s: %w", IndexFile, err)
	}
	if err := os.Rename(path, filepath.Join(p.dir, IndexFile)); err != nil {
		return fmt.Errorf("blobpack: rewrite %s: %w", IndexFile, err)
	}
	ok = true
	old := p.idx
	p.idx, p.idxSize = f, c.written
	old.Close()
	if err := syncfile.Dir(p.dir); err != nil {
		return fmt.Errorf("blobpack: rewrite %s: %w", IndexFile, err)
	}
	return nil
}

// idxCopy copies blobs.idx entries, those of [start, next) replaced by
// news, written once, where the first of the range was.
type idxCopy struct {
	w           *bufio.Writer
	start, next int64
	news        []Entry
	done        bool // news written
	written     int64
}

func (c *idxCopy) copy(from *os.File, off, end int64) error {
	r := bufio.NewReaderSize(io.NewSectionReader(from, off, end-off), scanBufSize)
	var b [idxEntrySize]byte
	for ; off+idxEntrySize <= end; off += idxEntrySize {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return err
		}
		e, ok := decodeIndexEntry(b[:])
		if ok && e.Offset >= c.start && e.Offset < c.next {
			continue
		}
		if ok && e.Offset >= c.next {
			if err := c.writeNews(); err != nil {
				return err
			}
		}
		if err := c.put(b[:]); err != nil {
			return err
		}
	}
	return nil
}

func (c *idxCopy) writeNews() error {
	if c.done {
		return nil
	}
	c.done = true
	var b [idxEntrySize]byte
	for k := range c.news {
		putIndexEntry(b[:], &c.news[k])
		if err := c.put(b[:]); err != nil {
			return err
		}
	}
	return nil
}

func (c *idxCopy) put(b []byte) error {
	_, err := c.w.Write(b)
	c.written += int64(len(b))
	return err
}

func (c *idxCopy) flush() error {
	if err := c.writeNews(); err != nil {
		return err
	}
	return c.w.Flush()
}
