package blobpack

import "fmt"

// What the pack tells of the blobs that may have died, for the count of
// each segment's dead bytes a compaction's trigger reads (docs/storage.md,
// Compaction): where their records lie, from the index alone, and a
// rollover that closes the active segment early so that a compaction may
// rewrite the records in it.

// Extent is where a blob's record lies in the pack: its offset, its size
// in bytes, and the tenant that stored the blob first.
type Extent struct {
	Offset, Size int64
	Owner        uint32
}

// ExtentsOwnedBy returns the extents of the records of the blobs the
// index holds whose first storer owner accepts, in no order. owner is
// called with the pack's lock held: it must return at once.
func (p *Pack) ExtentsOwnedBy(owner func(tenant uint32) bool) []Extent {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []Extent
	for i := range uint32(p.index.len()) {
		s := p.index.at(i)
		if owner(s.owner) {
			e := s.entry()
			out = append(out, Extent{Offset: e.Offset, Size: e.recordSize(), Owner: e.Owner})
		}
	}
	return out
}

// ExtentsOf returns the extents of the records of the blobs among hashes
// the index holds, in no order.
func (p *Pack) ExtentsOf(hashes []Hash) []Extent {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]Extent, 0, len(hashes))
	for i := range hashes {
		if e, ok := p.index.lookup(&hashes[i]); ok {
			out = append(out, Extent{Offset: e.Offset, Size: e.recordSize(), Owner: e.Owner})
		}
	}
	return out
}

// Rollover closes the active segment at the pack's end and starts the
// next one there (segment.Set.Rollover), unless the active segment holds
// no record; it reports whether it closed one, which Options.OnRollover
// is told of. A Put staged before it writes to the new segment.
func (p *Pack) Rollover() (bool, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if err := p.writable(); err != nil {
		return false, err
	}
	rolled, err := p.pack.Rollover(p.packSize.Load())
	if err != nil {
		return false, fmt.Errorf("blobpack: roll over: %w", err)
	}
	return rolled, nil
}
