package blobpack

import (
	"bytes"
	"fmt"

	"github.com/zeebo/blake3"
)

// maxRetainedBuf is the largest write buffer Put keeps between calls.
const maxRetainedBuf = 4 << 20

// Put stores the blobs of a batch that are not stored yet. Blobs already in
// the pack, and repeats within the batch, are not written again. The new
// records are appended with one write and one fsync for the whole batch;
// only then do they become visible to Lookup and Read, so a blob is never
// served before it is durable. Results are in the order of items.
//
// Put validates the whole batch first (sizes; hashes with
// Options.VerifyHashes) and writes nothing if an item is rejected. After a
// failed write the pack's file is cut back and stays usable; after a
// failed fsync every later Put fails, as the file's state is unknown until
// it is reopened.
func (p *Pack) Put(items []PutItem) ([]Result, error) {
	st, err := p.Stage(items)
	if err != nil {
		return nil, err
	}
	return p.Write(st)
}

// Staged is a batch of blobs that Stage validated, compressed and laid out
// after the pack's end; Write writes it.
type Staged struct {
	results []Result // filled for the items already stored
	todo    []int    // items to write (first occurrences of new hashes)
	repeats map[int]int
	entries []Entry // of items[todo], from start on
	stored  [][]byte
	start   int64
	// End is the pack's size once Write succeeds: known before the write,
	// so that it can go into the group's statement (docs/storage.md).
	End int64
}

// Stage does the first half of Put: it validates the batch, looks up which
// blobs are new, compresses them and lays their records out after the
// pack's current end. Nothing is written or visible until Write.
func (p *Pack) Stage(items []PutItem) (*Staged, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if err := p.writable(); err != nil {
		return nil, err
	}
	if err := p.validate(items); err != nil {
		return nil, err
	}
	st := &Staged{results: make([]Result, len(items)), start: p.packSize.Load()}
	st.End = st.start
	st.todo, st.repeats = p.plan(items, st.results)
	if len(st.todo) == 0 {
		return st, nil
	}
	st.stored = make([][]byte, len(st.todo))
	codecs := make([]Codec, len(st.todo))
	p.z.compressAll(items, st.todo, st.stored, codecs)
	st.entries = make([]Entry, len(st.todo))
	for k, i := range st.todo {
		it := &items[i]
		st.entries[k] = Entry{Hash: it.Hash, Offset: st.End, RawLen: uint32(len(it.Data)),
			StoredLen: uint32(len(st.stored[k])), Owner: it.Owner, Codec: codecs[k]}
		st.End += st.entries[k].recordSize()
	}
	if st.End > maxPackSize {
		return nil, fmt.Errorf("blobpack: put: pack would grow to %d bytes, limit %d", st.End, int64(maxPackSize))
	}
	return st, nil
}

// Write appends a staged batch's records with one write and one fsync,
// then makes them visible, and returns a result per staged item. It fails
// with ErrStale, writing nothing, if the pack grew since Stage.
func (p *Pack) Write(st *Staged) ([]Result, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if err := p.writable(); err != nil {
		return nil, err
	}
	if len(st.todo) == 0 {
		return st.results, nil
	}
	if size := p.packSize.Load(); size != st.start {
		return nil, fmt.Errorf("blobpack: put: staged at %d, pack now ends at %d: %w", st.start, size, ErrStale)
	}
	buf := p.writeBuf(int(st.End - st.start))
	for k := range st.entries {
		buf = appendRecord(buf, &st.entries[k], st.stored[k])
	}
	if err := p.write(buf, st.start); err != nil {
		return nil, err
	}
	p.publish(st.entries)
	p.appendIndex(st.entries)
	for k, i := range st.todo {
		st.results[i] = Result{Entry: st.entries[k], New: true}
	}
	for i, k := range st.repeats {
		st.results[i].Entry = st.entries[k]
	}
	return st.results, nil
}

func (p *Pack) writable() error {
	switch {
	case p.closed.Load():
		return fmt.Errorf("blobpack: put: %w", ErrClosed)
	case p.pack.Err() != nil:
		return fmt.Errorf("blobpack: put: pack unusable after an earlier failure (reopen it): %w", p.pack.Err())
	}
	return nil
}

func (p *Pack) validate(items []PutItem) error {
	limit := p.opts.maxBlobSize()
	for i := range items {
		it := &items[i]
		if len(it.Data) > limit {
			return fmt.Errorf("blobpack: put %x: %d bytes > %d: %w", it.Hash, len(it.Data), limit, ErrTooLarge)
		}
		if err := p.validateStored(it); err != nil {
			return err
		}
		if p.opts.VerifyHashes && blake3.Sum256(it.Data) != it.Hash {
			return fmt.Errorf("blobpack: put %x: %w", it.Hash, ErrHashMismatch)
		}
	}
	return nil
}

// validateStored checks a caller-encoded stored form: its shape always,
// its content with Options.VerifyHashes.
func (p *Pack) validateStored(it *PutItem) error {
	switch {
	case it.Stored == nil:
		return nil
	case it.Codec == CodecRaw && len(it.Stored) != len(it.Data):
		return fmt.Errorf("blobpack: put %x: raw stored form of %d bytes for %d bytes of data", it.Hash, len(it.Stored), len(it.Data))
	case it.Codec != CodecRaw && it.Codec != CodecZstd:
		return fmt.Errorf("blobpack: put %x: unknown %v", it.Hash, it.Codec)
	case len(it.Stored) > 1<<32-1:
		return fmt.Errorf("blobpack: put %x: stored form of %d bytes: %w", it.Hash, len(it.Stored), ErrTooLarge)
	case !p.opts.VerifyHashes:
		return nil
	}
	e := Entry{Hash: it.Hash, RawLen: uint32(len(it.Data)), StoredLen: uint32(len(it.Stored)), Codec: it.Codec}
	data, err := p.z.decompress(&e, it.Stored)
	if err != nil || !bytes.Equal(data, it.Data) {
		return fmt.Errorf("blobpack: put %x: stored form does not decode to the data: %w", it.Hash, ErrHashMismatch)
	}
	return nil
}

// plan fills results for items already stored and returns todo, the
// indexes of the items to write (first occurrences of new hashes), and
// repeats, which maps each later repeat of a new hash to its position in todo.
func (p *Pack) plan(items []PutItem, results []Result) (todo []int, repeats map[int]int) {
	var seen map[Hash]int // hash -> position in todo
	p.mu.RLock()
	defer p.mu.RUnlock()
	for i := range items {
		h := &items[i].Hash
		if e, ok := p.lookupLocked(h); ok {
			results[i] = Result{Entry: e}
			continue
		}
		if k, ok := seen[*h]; ok {
			if repeats == nil {
				repeats = make(map[int]int)
			}
			repeats[i] = k
			continue
		}
		if seen == nil {
			seen = make(map[Hash]int, len(items)-i)
		}
		seen[*h] = len(todo)
		todo = append(todo, i)
	}
	return todo, repeats
}

// writeBuf returns an empty buffer with capacity n, reused across calls
// when small.
func (p *Pack) writeBuf(n int) []byte {
	if n > maxRetainedBuf {
		return make([]byte, 0, n)
	}
	if cap(p.wbuf) < n {
		p.wbuf = make([]byte, 0, max(n, 64<<10))
	}
	return p.wbuf[:0]
}

// write writes buf at off in the pack and fsyncs it; on error nothing of
// buf stays (see segment.Set.Write).
func (p *Pack) write(buf []byte, off int64) error {
	if err := p.pack.Write(buf, off); err != nil {
		return fmt.Errorf("blobpack: put: %w", err)
	}
	return nil
}

// publish makes durable records visible to readers.
func (p *Pack) publish(entries []Entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range entries {
		p.insert(&entries[k])
		p.healed(entries[k].Hash)
	}
	p.packSize.Store(entries[len(entries)-1].end())
}

// appendIndex appends index entries to blobs.idx without fsync (see doc.go
// for why that is safe). After a write error it stops maintaining the
// index; the next Open rebuilds it.
func (p *Pack) appendIndex(entries []Entry) {
	if p.idxErr != nil {
		return
	}
	buf := p.writeBuf(len(entries) * idxEntrySize)[:len(entries)*idxEntrySize]
	for k := range entries {
		putIndexEntry(buf[k*idxEntrySize:], &entries[k])
	}
	if _, err := p.idx.WriteAt(buf, p.idxSize); err != nil {
		p.mu.Lock()
		p.idxErr = fmt.Errorf("blobpack: append %s at %d: %w", IndexFile, p.idxSize, err)
		p.mu.Unlock()
		return
	}
	p.idxSize += int64(len(buf))
}
