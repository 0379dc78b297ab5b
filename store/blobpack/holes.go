package blobpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrDamaged is returned when a blob's record lies in a hole: a damaged
// region of the pack that recovery kept rather than cut.
var ErrDamaged = errors.New("blob record damaged")

// Hole is a damaged region of blobs.pack that Open found and kept (bytes
// below the committed end, Options.MinValidSize, and bytes followed by
// valid records, are never cut, so a bad record there costs only itself;
// every later record is indexed and read normally), or an indexed record
// that failed its checks when read (FoundOnRead): from then on its blob
// reads as damaged without reading the record again, and storing the
// blob again heals it, as it does a hole Open found.
type Hole struct {
	// Offset and End delimit the damaged bytes.
	Offset, End int64
	// Hash is the blob whose record the hole was, when blobs.idx still
	// describes it (HashKnown); a hole found only by scanning the pack may
	// have held any number of blobs.
	Hash      Hash
	HashKnown bool
	// Owner is the tenant that stored the blob first, as blobs.idx
	// recorded it; meaningful only when HashKnown.
	Owner uint32
	// Reason says what is wrong with the bytes.
	Reason string
	// FoundOnRead: the record failed its checks when read (see
	// Options.OnDamage), not when Open loaded the pack.
	FoundOnRead bool
}

// DamageError is the error of reading a blob whose record is damaged:
// it lies in a hole Open found, or it failed its checks (CRC, header,
// decompression, hash) when read. It wraps ErrDamaged and, for damage
// found when read, the cause (which wraps ErrCorrupt or ErrHashMismatch).
type DamageError struct {
	Hash Hash
	// Offset and End delimit the damaged bytes of blobs.pack: the hole,
	// or the record that failed when read.
	Offset, End int64
	// Reason says what is wrong with the bytes.
	Reason string
	cause  error
}

// Error implements error.
func (e *DamageError) Error() string {
	s := fmt.Sprintf("blobpack: blob %x: its record at %d..%d of %s is damaged (%s)", e.Hash, e.Offset, e.End, PackFile, e.Reason)
	if e.cause != nil {
		return s + ": " + e.cause.Error()
	}
	return s + ": " + ErrDamaged.Error()
}

// Unwrap returns ErrDamaged and the cause, if any.
func (e *DamageError) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrDamaged, e.cause}
	}
	return []error{ErrDamaged}
}

// damagedRecord is the error of an indexed record that failed its checks
// when read. The first time the record the index holds for its blob fails
// so, it becomes a hole (FoundOnRead), and Options.OnDamage is told.
func (p *Pack) damagedRecord(e *Entry, reason string, cause error) error {
	p.foundOnRead(e, reason)
	return &DamageError{Hash: e.Hash, Offset: e.Offset, End: e.end(), Reason: reason, cause: cause}
}

// foundOnRead makes e's record a hole, unless it is one already or e is
// not the entry the index holds for its blob (a caller's stale or made-up
// Entry says nothing about the pack), and tells Options.OnDamage.
func (p *Pack) foundOnRead(e *Entry, reason string) {
	p.mu.Lock()
	cur, indexed := p.index.lookup(&e.Hash)
	if !indexed || cur != *e || p.hiddenLocked(&cur) {
		p.mu.Unlock()
		return
	}
	p.addHole(e.Offset, e.end(), e, reason)
	p.holes[len(p.holes)-1].FoundOnRead = true
	hole := p.holes[len(p.holes)-1]
	p.mu.Unlock()
	if p.opts.OnDamage != nil {
		p.opts.OnDamage(hole)
	}
}

// hiddenLocked reports whether e, an entry of the index, is a record found
// damaged when read: Lookup does not return it, so that its blob reads as
// damaged and a Put of the blob writes it again. The caller holds mu.
func (p *Pack) hiddenLocked(e *Entry) bool {
	if len(p.holeByHash) == 0 {
		return false
	}
	i, ok := p.holeByHash[e.Hash]
	return ok && p.holes[i].Offset == e.Offset
}

// Holes returns the damaged regions Open found and the records found
// damaged when read, in the order they were found.
func (p *Pack) Holes() []Hole {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return append([]Hole(nil), p.holes...)
}

// HoleOf returns the hole holding the blob with hash h, if Open found one
// that blobs.idx names, or its record failed its checks when read, and
// the blob was not stored again since.
func (p *Pack) HoleOf(h Hash) (Hole, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	i, ok := p.holeByHash[h]
	if !ok {
		return Hole{}, false
	}
	return p.holes[i], true
}

// addHole records a damaged region found while opening; e is the index
// entry of the blob whose record it was, when known.
func (p *Pack) addHole(off, end int64, e *Entry, reason string) {
	h := Hole{Offset: off, End: end, Reason: reason}
	if e != nil {
		h.Hash, h.HashKnown, h.Owner = e.Hash, true, e.Owner
		if p.holeByHash == nil {
			p.holeByHash = map[Hash]int{}
		}
		p.holeByHash[h.Hash] = len(p.holes)
	}
	p.holes = append(p.holes, h)
}

// damaged returns the error for a blob that is not indexed because its
// record lies in a hole, or nil. The caller holds mu.
func (p *Pack) damaged(h Hash) error {
	i, ok := p.holeByHash[h]
	if !ok {
		return nil
	}
	hole := p.holes[i]
	return &DamageError{Hash: h, Offset: hole.Offset, End: hole.End, Reason: hole.Reason}
}

// notFound is the error of a lookup that failed: the blob is in a hole, or
// unknown.
func (p *Pack) notFound(h Hash) error {
	p.mu.RLock()
	err := p.damaged(h)
	p.mu.RUnlock()
	if err != nil {
		return err
	}
	return fmt.Errorf("blobpack: read %x: %w", h, ErrNotFound)
}

// healed forgets the hole of a blob stored again. The caller holds mu.
func (p *Pack) healed(h Hash) {
	delete(p.holeByHash, h)
}

// resyncWindow is how much of the pack resync reads at a time.
const resyncWindow = 1 << 20

// resync finds the first valid record at or after from (before size): a
// record whose magic, header and CRC check. It returns its offset and
// whether there is one.
func (p *Pack) resync(from, size int64) (int64, bool, error) {
	var mag [4]byte
	binary.LittleEndian.PutUint32(mag[:], magic)
	buf := make([]byte, resyncWindow)
	for start := from; start < size; start += resyncWindow - int64(len(mag)-1) {
		n, err := p.pack.ReadAt(buf[:min(int64(len(buf)), size-start)], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, false, fmt.Errorf("blobpack: open: read %s at %d: %w", PackFile, start, err)
		}
		for i := 0; ; i++ {
			k := bytes.Index(buf[i:n], mag[:])
			if k < 0 {
				break
			}
			i += k
			if ok, err := p.validRecordAt(start+int64(i), size); err != nil || ok {
				return start + int64(i), ok, err
			}
		}
		if int64(n) < int64(len(buf)) {
			break
		}
	}
	return 0, false, nil
}

// validRecordAt reports whether a whole, valid record starts at off.
func (p *Pack) validRecordAt(off, size int64) (bool, error) {
	var hdr [headerSize]byte
	if off+headerSize > size {
		return false, nil
	}
	if _, err := p.pack.ReadAt(hdr[:], off); err != nil {
		return false, fmt.Errorf("blobpack: open: read %s at %d: %w", PackFile, off, err)
	}
	e, err := parseHeader(hdr[:], off)
	if err != nil || checkHeader(hdr[:], &e) != nil || e.end() > size || int(e.StoredLen) > p.opts.maxBlobSize()+headerSize {
		return false, nil
	}
	rec := make([]byte, e.recordSize())
	if _, err := p.pack.ReadAt(rec, off); err != nil {
		return false, fmt.Errorf("blobpack: open: read %s at %d: %w", PackFile, off, err)
	}
	_, _, err = decodeRecord(rec, off)
	return err == nil, nil
}

// Has reports whether the blob with hash h is stored and readable: nil;
// an error wrapping ErrDamaged when its record is in a hole; else one
// wrapping ErrNotFound.
func (p *Pack) Has(h Hash) error {
	if _, ok := p.Lookup(h); ok {
		return nil
	}
	return p.notFound(h)
}
