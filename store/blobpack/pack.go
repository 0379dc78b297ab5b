package blobpack

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cardboxhq/cardbox/store/segment"
	"github.com/cardboxhq/cardbox/store/syncfile"

	"github.com/zeebo/blake3"
)

// File names inside the pack directory.
const (
	PackFile  = "blobs.pack"
	IndexFile = "blobs.idx"
)

// DefaultMaxBlobSize is the default Options.MaxBlobSize: the largest
// payload the CXDB protocol accepts.
const DefaultMaxBlobSize = 64 << 20

// Sentinel errors. Errors returned by this package wrap them with context;
// test with errors.Is.
var (
	ErrNotFound     = errors.New("blob not found")
	ErrCorrupt      = errors.New("blob pack corrupt")
	ErrClosed       = errors.New("blob pack closed")
	ErrTooLarge     = errors.New("blob too large")
	ErrHashMismatch = errors.New("blob hash mismatch")
	// ErrStale: a Staged batch was written after the pack changed.
	ErrStale = errors.New("staged blobs are stale: the pack changed since Stage")
)

// Options configure Open. The zero value is ready to use.
type Options struct {
	// MaxBlobSize is the largest blob Put accepts (uncompressed bytes).
	// Zero means DefaultMaxBlobSize; values above 4 GiB - 1 are capped.
	MaxBlobSize int

	// MinValidSize is the pack size the caller knows to be committed (for
	// example recorded next to committed facts). Open never cuts below it:
	// a bad record there is a Hole, and a pack shorter than it fails Open
	// with ErrCorrupt. Zero: only bytes after the last valid record may be
	// cut.
	MinValidSize int64

	// VerifyHashes is a debug switch: Put recomputes the BLAKE3 of every
	// new blob and Read checks the hash of what it returns.
	VerifyHashes bool

	// CacheBytes bounds the cache of uncompressed blobs that View keeps.
	// Zero means DefaultCacheBytes; a negative value disables the cache.
	CacheBytes int

	// Reserve, when > 0, keeps zeros written ahead of the end of
	// blobs.pack, this many bytes at a time, so that a Put's fdatasync
	// flushes data only (see syncfile.Reserve). 0 grows the file with
	// every Put.
	Reserve int64

	// OnDamage, if set, is told of each record that fails its checks
	// when read (a flipped byte in stored bytes Open did not verify):
	// the Hole it now is (FoundOnRead), once, from the reading
	// goroutine, after the pack's locks are released. It must return
	// quickly: the read waits for it.
	OnDamage func(Hole)

	// SegmentSize bounds the pack's segments (see package segment): a Put
	// that would take a non-empty segment past it starts the next one.
	// Zero: one unbounded segment, the single blobs.pack.
	SegmentSize int64

	// OnRollover, if set, is told of each segment a Put closed, with the
	// writer's lock held: it must return at once.
	OnRollover func(segment.Info)
}

func (o Options) cacheBytes() int {
	if o.CacheBytes == 0 {
		return DefaultCacheBytes
	}
	return max(o.CacheBytes, 0)
}

func (o Options) maxBlobSize() int {
	if o.MaxBlobSize <= 0 {
		return DefaultMaxBlobSize
	}
	return int(min(int64(o.MaxBlobSize), 1<<32-1))
}

// Recovery describes what Open found and repaired.
type Recovery struct {
	Indexed      int   // records restored from blobs.idx
	Scanned      int   // records recovered by scanning blobs.pack past the index
	IndexDropped int64 // bytes of blobs.idx discarded: bad, partial or stale entries
	TornBytes    int64 // bytes cut from the end of blobs.pack (not a zero reservation)
}

// Stats is a snapshot of a pack's counters.
type Stats struct {
	Blobs     int   // distinct blobs
	PackBytes int64 // size of blobs.pack
	RawBytes  int64 // sum of the blobs' uncompressed sizes
	// IndexErr is the first error writing blobs.idx, after which the pack
	// stops appending to it; the next Open rebuilds it from blobs.pack.
	IndexErr error
}

// Pack is a content-addressed blob store in one append-only file.
//
// Lookup, Read, View, ReadEntry and Stats are safe for concurrent use with each
// other and with Put. Put is meant for a single writer (the group
// committer); concurrent calls are serialized.
type Pack struct {
	dir   string
	opts  Options
	z     *zcodec
	cache *blobCache   // nil: no cache
	pack  *segment.Set // blobs.pack and the segments after it
	idx   *os.File

	closed   atomic.Bool
	packSize atomic.Int64 // every byte below is a published, fsynced record

	mu         sync.RWMutex // guards the fields below; the writer also holds wmu to change idxErr
	index      *index
	rawBytes   int64
	ownerBytes map[uint32]int64 // rawBytes by the tenant that stored each blob first
	idxErr     error            // first blobs.idx write error; the index is no longer appended
	holes      []Hole           // damaged regions found by Open, then records found damaged when read
	holeByHash map[Hash]int     // holes whose blob is known and not stored again
	watch      *watch           // the segment a compaction rewrites, if one runs
	condemned  map[Hash]int64   // blobs a compaction drops, by the offset of the record it drops

	wmu      sync.Mutex // serializes Put and Close; guards the fields below
	wbuf     []byte
	idxSize  int64
	recovery Recovery
}

// PutItem is one blob to store.
type PutItem struct {
	Hash  Hash   // BLAKE3-256 of Data, computed and checked by the caller
	Data  []byte // uncompressed bytes; not retained after Put returns
	Owner uint32 // tenant storing it; kept only if the blob is new

	// Stored and Codec optionally carry the result of Encode(Data). When
	// Stored is nil, Put encodes Data itself.
	Stored []byte
	Codec  Codec
}

// Result is the outcome of storing one PutItem.
type Result struct {
	Entry Entry
	New   bool // false if the blob was already stored, or repeated earlier in the batch
}

// Open opens the pack in dir, creating dir and its files if missing, and
// recovers from any crash leftovers (see the package documentation).
func Open(dir string, opts Options) (*Pack, error) {
	p := &Pack{dir: dir, opts: opts, z: zc(), cache: newBlobCache(opts.cacheBytes())}
	if err := p.openFiles(); err != nil {
		return nil, err
	}
	if err := p.recover(); err != nil {
		p.closeFiles()
		return nil, err
	}
	return p, nil
}

func (p *Pack) openFiles() error {
	if err := mkdir(p.dir); err != nil {
		return err
	}
	var createdIdx bool
	var err error
	p.pack, err = segment.Open(Layout(p.dir), segment.Options{
		MaxSize: p.opts.SegmentSize, Reserve: p.opts.Reserve, OnRollover: p.opts.OnRollover,
	})
	if err != nil {
		return fmt.Errorf("blobpack: open: %w", err)
	}
	// A copy of blobs.idx a compaction did not finish: blobs.idx is whole.
	if err := os.Remove(filepath.Join(p.dir, compactedIndexFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.closeFiles()
		return fmt.Errorf("blobpack: open: %w", err)
	}
	if p.idx, createdIdx, err = openOrCreate(filepath.Join(p.dir, IndexFile)); err != nil {
		p.closeFiles()
		return err
	}
	if createdIdx {
		if err := syncfile.Dir(p.dir); err != nil {
			p.closeFiles()
			return err
		}
	}
	return nil
}

// openOrCreate opens name for reading and writing and reports whether it
// had to create it.
// mkdir creates dir if missing and then fsyncs its parent, so that the new
// directory entry is as durable as the files created in it.
func mkdir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("blobpack: open: %w", err)
	}
	return syncfile.Dir(filepath.Dir(dir))
}

func openOrCreate(name string) (*os.File, bool, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, os.ErrExist) {
		return nil, false, fmt.Errorf("blobpack: open: %w", err)
	}
	if f, err = os.OpenFile(name, os.O_RDWR, 0); err != nil {
		return nil, false, fmt.Errorf("blobpack: open: %w", err)
	}
	return f, false, nil
}

// Layout names the segment files of the pack in dir: blobs.pack and the
// segments after it.
func Layout(dir string) segment.Layout { return segment.Layout{Dir: dir, Base: PackFile} }

// Segments describes the pack's segment files, closed ones first (see
// package segment).
func (p *Pack) Segments() []segment.Info { return p.pack.Segments() }

// Span describes the segment holding offset off (segment.Set.Span).
func (p *Pack) Span(off int64) (id segment.ID, end, next int64, ok bool) { return p.pack.Span(off) }

// Closed describes the pack's closed segments: every one but the last.
func (p *Pack) Closed() []segment.Info { return p.pack.Closed() }

func (p *Pack) closeFiles() {
	if p.pack != nil {
		p.pack.Close()
	}
	if p.idx != nil {
		p.idx.Close()
	}
}

// Recovery reports what Open found and repaired.
func (p *Pack) Recovery() Recovery { return p.recovery }

// Lookup returns the entry of the blob with hash h: not of a blob whose
// record is a hole (see HoleOf), not even one the index still lists (a
// record found damaged when read).
func (p *Pack) Lookup(h Hash) (Entry, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.lookupLocked(&h)
}

// lookupLocked is Lookup; the caller holds mu.
func (p *Pack) lookupLocked(h *Hash) (Entry, bool) {
	e, ok := p.index.lookup(h)
	if !ok || p.hiddenLocked(&e) || p.condemnedLocked(&e) {
		return Entry{}, false
	}
	if p.watch != nil {
		p.watch.hit(&e)
	}
	return e, true
}

// Stats returns the pack's current counters.
func (p *Pack) Stats() Stats {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return Stats{Blobs: p.index.len(), PackBytes: p.packSize.Load(), RawBytes: p.rawBytes, IndexErr: p.idxErr}
}

// OwnerBytes returns the uncompressed bytes of the blobs that owner
// stored first: what the pack holds for it, counting each blob once.
func (p *Pack) OwnerBytes(owner uint32) int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.ownerBytes[owner]
}

// Read returns the uncompressed bytes of the blob with hash h. The result
// is the caller's to keep and modify. A blob in View's cache is copied
// from there (it was CRC-checked when read and is checked again); Read
// does not add blobs to the cache.
func (p *Pack) Read(h Hash) ([]byte, error) {
	if p.cache != nil && !p.closed.Load() {
		if data, ok := p.cache.get(&h); ok {
			return bytes.Clone(data), nil
		}
	}
	return p.readCurrent(h)
}

// readCurrent reads the blob with hash h where the index puts it. A
// compaction may move its record between the lookup and the read (the
// read then fails its checks, or finds the old file closed): the blob is
// read again where the index puts it now.
func (p *Pack) readCurrent(h Hash) ([]byte, error) {
	for try := 0; ; try++ {
		e, ok := p.Lookup(h)
		if !ok {
			return nil, p.notFound(h)
		}
		data, err := p.ReadEntry(e)
		if err == nil || try == 3 {
			return data, err
		}
		if now, ok := p.Lookup(h); !ok || now == e {
			return data, err
		}
	}
}

// View returns the uncompressed bytes of the blob with hash h, like Read,
// but they may be shared with the pack's cache and with other callers:
// the caller must not modify them. A blob read once stays in the cache
// (Options.CacheBytes) while it is read often, saving the pread and the
// decompression; cached bytes are checked against a CRC on every hit.
func (p *Pack) View(h Hash) ([]byte, error) {
	if p.closed.Load() {
		return nil, fmt.Errorf("blobpack: read %x: %w", h, ErrClosed)
	}
	if p.cache != nil {
		if data, ok := p.cache.get(&h); ok {
			return data, nil
		}
	}
	data, err := p.readCurrent(h)
	if err != nil {
		return nil, err
	}
	if p.cache != nil {
		p.cache.put(&h, data)
	}
	return data, nil
}

// ReadEntry returns the uncompressed bytes of the blob e describes, as
// returned by Lookup or Put. It reads the record with one pread and checks
// its CRC, that its header matches e, and the decompressed length; a
// record that fails is a *DamageError naming its bytes. The result is the
// caller's to keep and modify.
func (p *Pack) ReadEntry(e Entry) ([]byte, error) {
	if p.closed.Load() {
		return nil, fmt.Errorf("blobpack: read %x: %w", e.Hash, ErrClosed)
	}
	if e.Offset < 0 || e.end() > p.packSize.Load() {
		return nil, fmt.Errorf("blobpack: read %x at %d: record past end of pack: %w", e.Hash, e.Offset, ErrNotFound)
	}
	buf := getReadBuf(int(e.recordSize()))
	defer putReadBuf(buf)
	if _, err := p.pack.ReadAt(*buf, e.Offset); err != nil {
		return nil, fmt.Errorf("blobpack: read %x at %d: %w", e.Hash, e.Offset, err)
	}
	got, stored, err := decodeRecord(*buf, e.Offset)
	if err != nil {
		return nil, p.damagedRecord(&e, "record fails its checks when read", err)
	}
	if got != e {
		return nil, p.damagedRecord(&e, "record header does not match its index entry when read",
			fmt.Errorf("blobpack: read %x at %d: header %+v does not match entry: %w", e.Hash, e.Offset, got, ErrCorrupt))
	}
	data, err := p.z.decompressOwned(&e, stored)
	if err != nil {
		return nil, p.damagedRecord(&e, "record does not decompress when read", err)
	}
	if p.opts.VerifyHashes && blake3.Sum256(data) != e.Hash {
		return nil, p.damagedRecord(&e, "record does not hash to its blob when read",
			fmt.Errorf("blobpack: read %x at %d: %w", e.Hash, e.Offset, ErrHashMismatch))
	}
	return data, nil
}

// maxPooledRead is the largest record read into a pooled buffer; larger
// ones are rare and get their own.
const maxPooledRead = maxCachedBlob + recordOverhead

// readBufs holds record read buffers (*[]byte), so that a read allocates
// only the uncompressed bytes it returns.
var readBufs sync.Pool

// getReadBuf returns a buffer of length n; putReadBuf takes it back.
func getReadBuf(n int) *[]byte {
	if n <= maxPooledRead {
		if b, ok := readBufs.Get().(*[]byte); ok && cap(*b) >= n {
			*b = (*b)[:n]
			return b
		}
	}
	b := make([]byte, n, max(n, min(maxPooledRead, 4<<10)))
	return &b
}

func putReadBuf(b *[]byte) {
	if cap(*b) <= maxPooledRead {
		readBufs.Put(b)
	}
}

// Close syncs blobs.idx and closes the files. It waits for a running Put.
// Reads after Close fail with ErrClosed.
func (p *Pack) Close() error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.closed.Swap(true) {
		return nil
	}
	var errs []error
	if p.idxErr == nil {
		errs = append(errs, p.idx.Sync())
	}
	errs = append(errs, p.idx.Close(), p.pack.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("blobpack: close: %w", err)
	}
	return nil
}
