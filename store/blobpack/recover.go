package blobpack

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

const (
	scanBufSize     = 1 << 20
	headerWindow    = 64 << 10
	idxFlushEntries = 1024
	tailVerifyBytes = 1 << 20
)

// recover rebuilds the in-memory index from blobs.idx and blobs.pack and
// repairs both files; see the package documentation.
func (p *Pack) recover() error {
	packSize := p.pack.Size()
	idxSize, err := fileSize(p.idx)
	if err != nil {
		return err
	}
	p.index = newIndex(int(idxSize / idxEntrySize))
	p.ownerBytes = map[uint32]int64{}
	n, end, err := p.loadIndex(idxSize, packSize)
	if err != nil {
		return err
	}
	p.recovery.Indexed = n
	p.idxSize = int64(n) * idxEntrySize
	if p.idxSize != idxSize {
		p.recovery.IndexDropped = idxSize - p.idxSize
		if err := p.idx.Truncate(p.idxSize); err != nil {
			return fmt.Errorf("blobpack: open: truncate %s at %d: %w", IndexFile, p.idxSize, err)
		}
	}
	if end, err = p.scan(end, packSize); err != nil {
		return err
	}
	if err := p.cutTail(end, packSize); err != nil {
		return err
	}
	if p.recovery.Scanned > 0 || p.recovery.IndexDropped > 0 {
		if err := p.idx.Sync(); err != nil {
			return fmt.Errorf("blobpack: open: sync %s: %w", IndexFile, err)
		}
	}
	p.packSize.Store(end)
	return nil
}

func fileSize(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("blobpack: open: %w", err)
	}
	return fi.Size(), nil
}

// loadIndex inserts the valid prefix of blobs.idx into the index and
// returns its length in entries and the pack offset where it ends. An
// entry is valid if its CRC matches, it starts where the previous record
// ended, its record lies inside the pack, and the record's header agrees.
// The records in the last tailVerifyBytes of the indexed part (at least
// the last record) must also pass their CRC, as the tail is where damage
// from a crash or a lying disk would be.
func (p *Pack) loadIndex(idxSize, packSize int64) (n int, end int64, err error) {
	r := bufio.NewReaderSize(io.NewSectionReader(p.idx, 0, idxSize), scanBufSize)
	hr := &headerReader{f: p.pack, size: packSize, limit: p.pack.Limit}
	var tail []Entry // valid entries not yet inserted, the last ones read
	var b [idxEntrySize]byte
	for {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				return 0, 0, fmt.Errorf("blobpack: open: read %s: %w", IndexFile, err)
			}
			break
		}
		e, ok := decodeIndexEntry(b[:])
		end = p.pack.SkipGap(end) // a rewritten segment's records end before the next segment
		if !ok || e.Offset != end || e.end() > p.pack.Limit(e.Offset, packSize) {
			break
		}
		if ok, err := hr.matches(&e); err != nil {
			return 0, 0, err
		} else if !ok {
			if e.end() > p.opts.MinValidSize || p.rewritten(e.Offset) {
				// Past the committed end: a stale entry or a torn write.
				// In a compaction's rewrite: blobs.idx describes the
				// generation before (the process stopped before it
				// rewrote blobs.idx); the scan reads the rewrite.
				break
			}
			p.addHole(e.Offset, e.end(), &e, "record header does not match its blobs.idx entry")
			n++
			end = e.end()
			continue
		}
		n++
		end = e.end()
		tail = append(tail, e)
		for len(tail) > 1 && tail[0].end() <= end-tailVerifyBytes {
			p.insert(&tail[0])
			tail = tail[1:]
		}
	}
	kept, err := p.verifyRecords(tail)
	if err != nil {
		return 0, 0, err
	}
	if kept < len(tail) {
		n -= len(tail) - kept
		end = tail[kept].Offset
	}
	return n, end, nil
}

// verifyRecords checks the CRC of the records that entries describe, in
// pack order: each that passes is indexed, each that fails below the
// committed end is a hole. It returns how many entries it kept: all, or up
// to the first bad record past the committed end, where the pack may be
// cut.
func (p *Pack) verifyRecords(entries []Entry) (int, error) {
	var rec []byte
	for k := range entries {
		e := &entries[k]
		if int64(cap(rec)) < e.recordSize() {
			rec = make([]byte, e.recordSize())
		}
		b := rec[:e.recordSize()]
		if _, err := p.pack.ReadAt(b, e.Offset); err != nil {
			return 0, fmt.Errorf("blobpack: open: read %s at %d: %w", PackFile, e.Offset, err)
		}
		got, _, err := decodeRecord(b, e.Offset)
		switch {
		case err == nil && got == *e:
			p.insert(e)
		case e.end() <= p.opts.MinValidSize:
			p.addHole(e.Offset, e.end(), e, "record fails its CRC")
		default:
			return k, nil
		}
	}
	return len(entries), nil
}

// insert adds an entry to the index and the counters. A later record of
// a blob already indexed replaces the earlier one: Put writes a blob the
// index holds only when its record was found damaged (see Lookup), so the
// later record is the blob stored again, which heals it, at run time and
// when Open loads both entries from blobs.idx.
func (p *Pack) insert(e *Entry) {
	if p.index.insert(e) {
		p.rawBytes += int64(e.RawLen)
		p.ownerBytes[e.Owner] += int64(e.RawLen)
		return
	}
	old, _ := p.index.lookup(&e.Hash)
	if old.Offset >= e.Offset {
		return
	}
	p.index.replace(e)
	p.rawBytes += int64(e.RawLen) - int64(old.RawLen)
	p.ownerBytes[old.Owner] -= int64(old.RawLen)
	p.ownerBytes[e.Owner] += int64(e.RawLen)
}

// rewritten reports whether the segment holding off is a compaction's
// rewrite.
func (p *Pack) rewritten(off int64) bool {
	id, _, _, ok := p.pack.Span(off)
	return ok && id.Gen > 0
}

// headerReader reads record headers at increasing offsets through a
// window, so that small records cost far less than one pread each.
type headerReader struct {
	f     io.ReaderAt
	size  int64
	limit func(off, size int64) int64 // where the bytes readable from off end (segment.Set.Limit)
	buf   []byte
	start int64 // buf holds the pack's bytes [start, start+len(buf))
}

// matches reports whether the record header at e.Offset describes e.
func (h *headerReader) matches(e *Entry) (bool, error) {
	if e.Offset < h.start || e.Offset+headerSize > h.start+int64(len(h.buf)) {
		if err := h.fill(e.Offset); err != nil {
			return false, err
		}
	}
	b := h.buf[e.Offset-h.start:]
	got, err := parseHeader(b, e.Offset)
	if err != nil || checkHeader(b, &got) != nil {
		return false, nil
	}
	return got == *e, nil
}

func (h *headerReader) fill(off int64) error {
	if h.buf == nil {
		h.buf = make([]byte, headerWindow)
	}
	h.buf = h.buf[:min(int64(cap(h.buf)), h.limit(off, h.size)-off)]
	h.start = off
	if _, err := h.f.ReadAt(h.buf, off); err != nil {
		return fmt.Errorf("blobpack: open: read %s at %d: %w", PackFile, off, err)
	}
	return nil
}

// scan verifies the records of blobs.pack from offset from to size, adds
// them to the index and to blobs.idx, and returns where the last valid
// record ends. It reads segment by segment, skipping the gap after a
// rewritten one.
func (p *Pack) scan(from, size int64) (int64, error) {
	var rec []byte
	var pending []Entry
	off := p.pack.SkipGap(from)
	limit := p.pack.Limit(off, size)
	r := bufio.NewReaderSize(io.NewSectionReader(p.pack, off, limit-off), scanBufSize)
	for off < size {
		if off >= limit { // the end of a closed segment's bytes
			off = p.pack.SkipGap(off)
			limit = p.pack.Limit(off, size)
			r.Reset(io.NewSectionReader(p.pack, off, limit-off))
			continue
		}
		e, err := readRecord(r, off, limit, &rec)
		if errors.Is(err, ErrCorrupt) {
			next, found, err := p.skipDamage(off, limit, size)
			if err != nil || !found {
				off = next
				break
			}
			off = next
			r.Reset(io.NewSectionReader(p.pack, off, limit-off))
			continue
		}
		if err != nil {
			return 0, err
		}
		p.insert(&e)
		p.recovery.Scanned++
		off = e.end()
		if pending = append(pending, e); len(pending) == idxFlushEntries {
			p.appendIndex(pending)
			pending = pending[:0]
		}
	}
	if len(pending) > 0 {
		p.appendIndex(pending)
	}
	if p.idxErr != nil {
		return 0, fmt.Errorf("blobpack: open: %w", p.idxErr)
	}
	return off, nil
}

// skipDamage handles a bad record at off found by the scan, in a segment
// whose bytes end at limit. When a valid record follows in the segment,
// the bytes up to it are a hole and the scan goes on from there (found);
// when none does but a later segment starts, the rest of the segment is
// a hole and the scan goes on at its end. Otherwise the bad bytes are the
// tail: below the committed end they are a hole up to it, and the scan
// ends where cutting may start.
func (p *Pack) skipDamage(off, limit, size int64) (next int64, found bool, err error) {
	next, found, err = p.resync(off+1, limit)
	switch {
	case err != nil:
		return off, false, err
	case found:
		p.addHole(off, next, nil, "bad record, found by scanning blobs.pack")
		return next, true, nil
	case limit < size:
		p.addHole(off, limit, nil, "bad record, found by scanning blobs.pack")
		return limit, true, nil
	case off < p.opts.MinValidSize && p.opts.MinValidSize <= size:
		p.addHole(off, p.opts.MinValidSize, nil, "bad record before the committed end, found by scanning blobs.pack")
		return p.opts.MinValidSize, false, nil
	}
	return off, false, nil
}

// readRecord reads and verifies the record at off from r, using *buf as
// scratch. Errors wrapping ErrCorrupt mean a bad or partial record.
func readRecord(r *bufio.Reader, off, size int64, buf *[]byte) (Entry, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Entry{}, shortRead(err, off)
	}
	e, err := parseHeader(hdr[:], off)
	if err != nil {
		return Entry{}, err
	}
	n := e.recordSize()
	if off+n > size {
		return Entry{}, fmt.Errorf("blobpack: record at %d: %d bytes past end of pack: %w", off, off+n-size, ErrCorrupt)
	}
	if int64(cap(*buf)) < n {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	copy(b, hdr[:])
	if _, err := io.ReadFull(r, b[headerSize:]); err != nil {
		return Entry{}, shortRead(err, off)
	}
	e, _, err = decodeRecord(b, off)
	return e, err
}

func shortRead(err error, off int64) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("blobpack: record at %d: partial: %w", off, ErrCorrupt)
	}
	return fmt.Errorf("blobpack: open: read %s at %d: %w", PackFile, off, err)
}

// cutTail truncates a torn or corrupt tail [end, size) off blobs.pack,
// unless that would lose bytes below Options.MinValidSize. Zeros after end are a reservation, not a torn tail,
// and stay.
func (p *Pack) cutTail(end, size int64) error {
	torn := false
	if end < size {
		zero, err := p.pack.ZeroTail(end, size)
		if err != nil {
			return fmt.Errorf("blobpack: open: %w", err)
		}
		torn = !zero
	}
	if end < p.opts.MinValidSize {
		if torn {
			return fmt.Errorf("blobpack: open: bad record at %d, below min valid size %d (pack left untouched): %w",
				end, p.opts.MinValidSize, ErrCorrupt)
		}
		return fmt.Errorf("blobpack: open: pack ends at %d, below min valid size %d: %w", end, p.opts.MinValidSize, ErrCorrupt)
	}
	if !torn {
		return nil
	}
	if err := p.pack.Truncate(end); err != nil {
		return fmt.Errorf("blobpack: open: truncate %s at %d: %w", PackFile, end, err)
	}
	p.recovery.TornBytes = size - end
	return nil
}
