package turnlog

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cardboxhq/cardbox/store/segment"
)

// Sentinel errors. Errors returned by this package wrap them with context;
// test with errors.Is.
var (
	ErrCorrupt    = errors.New("turn log corrupt")
	ErrClosed     = errors.New("turn log closed")
	ErrOutOfRange = errors.New("turn log offset out of range")
)

// NoTruncate is the Options.TruncateAt value that keeps every verified
// record.
const NoTruncate int64 = -1

// Options configure Open.
type Options struct {
	// MinValidSize is the log size known to hold committed records. A bad
	// or partial record at or past it is a torn tail and is cut; one below
	// it, or a log shorter than it, makes Open fail with ErrCorrupt
	// without modifying the file: committed records would be lost, and
	// the operator must decide.
	MinValidSize int64

	// TruncateAt, when >= 0, cuts the log at that offset after
	// verification, dropping records that were written but never
	// committed; Open visits only the records below it. It must be a
	// multiple of RecordSize, at least MinValidSize, and at most the
	// verified size. NoTruncate (-1) keeps everything.
	//
	// Note that the zero value, 0, empties the log.
	TruncateAt int64

	// Reserve, when > 0, keeps zeros written ahead of the log's end, this
	// many bytes at a time, so that an Append's fdatasync flushes data
	// only (see syncfile.Reserve). 0 grows the file with every Append.
	Reserve int64

	// SegmentSize bounds the log's segments (see package segment): an
	// Append that would take a non-empty segment past it starts the next
	// one. Zero: one unbounded segment, the single turns.log.
	SegmentSize int64

	// OnRollover, if set, is told of each segment an Append closed, with
	// the writer's lock held: it must return at once.
	OnRollover func(segment.Info)
}

// Recovery describes what Open found and cut.
type Recovery struct {
	ValidSize    int64 // bytes of verified records found
	TornBytes    int64 // bytes cut at ValidSize: a partial or bad record and all after it (not a zero reservation)
	DroppedBytes int64 // verified bytes cut by Options.TruncateAt
}

// Log is an append-only file of fixed-size turn records.
//
// ReadAt, Size and Recovery are safe for concurrent use with each other and
// with Append and Truncate. Append and Truncate are meant for a single
// writer (the group committer); concurrent calls are serialized.
type Log struct {
	set      *segment.Set
	path     string
	size     atomic.Int64 // every byte below is a written, fsynced record
	closed   atomic.Bool
	recovery Recovery

	wmu sync.Mutex // serializes Append, Truncate and Close; guards below
	buf []byte
}

// Open opens the log whose first segment is path, creating it if
// missing, verifies every record of every segment and repairs the tail
// as Options say (see the package documentation). visit, if not nil, is called in order with the offset
// and contents of each verified record that is kept, so the caller can
// rebuild its index in the same pass; an error from visit aborts Open. If
// Open fails, records visited so far must be discarded.
func Open(path string, opts Options, visit func(off int64, r Record) error) (*Log, error) {
	set, err := segment.Open(Layout(path), segment.Options{
		MaxSize: opts.SegmentSize, Reserve: opts.Reserve, OnRollover: opts.OnRollover,
	})
	if err != nil {
		return nil, fmt.Errorf("turnlog: open: %w", err)
	}
	l := &Log{set: set, path: path}
	if err := l.open(opts, visit); err != nil {
		set.Close()
		return nil, err
	}
	return l, nil
}

// Layout names the segment files of the log whose first segment is path.
func Layout(path string) segment.Layout {
	return segment.Layout{Dir: filepath.Dir(path), Base: filepath.Base(path)}
}

func (l *Log) open(opts Options, visit func(int64, Record) error) error {
	size := l.set.Size()
	end, err := l.scan(size, opts.TruncateAt, visit)
	if err != nil {
		return err
	}
	torn, err := l.tornAfter(end, size)
	if err != nil {
		return err
	}
	cut, err := cutPoint(end, torn, opts)
	if err != nil {
		return fmt.Errorf("turnlog: open %s: %w", l.path, err)
	}
	if torn || cut < end {
		if err := l.truncateFile(cut); err != nil {
			return err
		}
	}
	l.recovery = Recovery{ValidSize: end, DroppedBytes: end - cut}
	if torn {
		l.recovery.TornBytes = size - end
	}
	l.size.Store(cut)
	return nil
}

// tornAfter reports whether the bytes from end, where verified records
// stop, to size are a torn write rather than zeros of a reservation.
func (l *Log) tornAfter(end, size int64) (bool, error) {
	if end == size {
		return false, nil
	}
	zero, err := l.set.ZeroTail(end, size)
	if err != nil {
		return false, fmt.Errorf("turnlog: open: %w", err)
	}
	return !zero, nil
}

// scanChunk is how many bytes scan reads at a time.
const scanChunk = 8192 * RecordSize

// scan verifies the records of the first size bytes, segment by segment
// (a rewritten segment may end before the next one starts: its records
// are packed at the start of its range), calls visit for those below
// keepBelow (all if keepBelow < 0), and returns where the first partial
// or bad record starts (size if none).
func (l *Log) scan(size, keepBelow int64, visit func(int64, Record) error) (int64, error) {
	if keepBelow < 0 {
		keepBelow = size
	}
	buf := make([]byte, min(scanChunk, size))
	for _, seg := range l.set.Segments() {
		from, to := seg.ID.Start, min(seg.End(), size)
		for off := from; off < to; {
			n := min(int64(len(buf)), to-off)
			if _, err := l.set.ReadAt(buf[:n], off); err != nil {
				return 0, fmt.Errorf("turnlog: open: read %s at %d: %w", l.path, off, err)
			}
			for i := int64(0); i < n; i += RecordSize {
				r, err := UnmarshalRecord(buf[i:n])
				if err != nil {
					return off + i, nil
				}
				if visit != nil && off+i < keepBelow {
					if err := visit(off+i, r); err != nil {
						return 0, fmt.Errorf("turnlog: open: record at %d: %w", off+i, err)
					}
				}
			}
			off += n
		}
	}
	return size, nil
}

// cutPoint returns where the log must end after Open, given that it holds
// verified records up to end, followed by a torn write if torn.
func cutPoint(end int64, torn bool, opts Options) (int64, error) {
	switch {
	case torn && end < opts.MinValidSize:
		return 0, fmt.Errorf("bad record at %d, below min valid size %d (file left untouched): %w",
			end, opts.MinValidSize, ErrCorrupt)
	case end < opts.MinValidSize:
		return 0, fmt.Errorf("log ends at %d, below min valid size %d: %w", end, opts.MinValidSize, ErrCorrupt)
	case opts.TruncateAt < 0:
		return end, nil
	case opts.TruncateAt%RecordSize != 0:
		return 0, fmt.Errorf("truncate offset %d is not a multiple of %d", opts.TruncateAt, RecordSize)
	case opts.TruncateAt < opts.MinValidSize:
		return 0, fmt.Errorf("truncate offset %d is below min valid size %d", opts.TruncateAt, opts.MinValidSize)
	case opts.TruncateAt > end:
		return 0, fmt.Errorf("truncate offset %d is past the %d verified bytes: %w", opts.TruncateAt, end, ErrCorrupt)
	}
	return opts.TruncateAt, nil
}

// truncateFile cuts the log at off, with its reservation and the
// segments past it, and fsyncs it.
func (l *Log) truncateFile(off int64) error {
	if err := l.set.Truncate(off); err != nil {
		return fmt.Errorf("turnlog: truncate %s at %d: %w", l.path, off, err)
	}
	return nil
}

// Segments describes the log's segment files, closed ones first (see
// package segment).
func (l *Log) Segments() []segment.Info { return l.set.Segments() }

// Closed describes the log's closed segments: every one but the last.
func (l *Log) Closed() []segment.Info { return l.set.Closed() }

// Recovery reports what Open found and cut.
func (l *Log) Recovery() Recovery { return l.recovery }

// Size returns the size of the log: the offset the next Append writes at.
func (l *Log) Size() int64 { return l.size.Load() }

// maxRetainedBuf is the largest encode buffer Append keeps between calls.
const maxRetainedBuf = 1 << 20

// Append writes recs at the end of the log with one write and one fsync
// (fdatasync on Linux) and returns the offset of the first; record i is at
// first + i*RecordSize. The records are visible to ReadAt and counted in
// Size only once durable.
//
// After a failed write the file is cut back and the log stays usable;
// after a failed fsync every later Append and Truncate fails, as the
// file's state is unknown until it is reopened.
func (l *Log) Append(recs []Record) (first int64, err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	off := l.size.Load()
	if len(recs) == 0 {
		return off, nil
	}
	buf := l.buffer(len(recs) * RecordSize)
	for i := range recs {
		recs[i].MarshalTo(buf[i*RecordSize:])
	}
	if err := l.set.Write(buf, off); err != nil {
		return 0, fmt.Errorf("turnlog: append %d records at %d: %w", len(recs), off, err)
	}
	l.size.Store(off + int64(len(buf)))
	return off, nil
}

func (l *Log) writable() error {
	switch {
	case l.closed.Load():
		return fmt.Errorf("turnlog: %s: %w", l.path, ErrClosed)
	case l.set.Err() != nil:
		return fmt.Errorf("turnlog: %s unusable after an earlier failure (reopen it): %w", l.path, l.set.Err())
	}
	return nil
}

// buffer returns a buffer of n bytes, reused across calls when small.
func (l *Log) buffer(n int) []byte {
	if n > maxRetainedBuf {
		return make([]byte, n)
	}
	if cap(l.buf) < n {
		l.buf = make([]byte, max(n, 64*RecordSize))
	}
	return l.buf[:n]
}

// Truncate cuts the log back to off, a record boundary at most Size, and
// fsyncs it. The committer uses it to roll back a batch whose commit
// failed. Records past off stop being readable at once.
func (l *Log) Truncate(off int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if size := l.size.Load(); off < 0 || off > size || off%RecordSize != 0 {
		return fmt.Errorf("turnlog: truncate %s at %d (size %d): %w", l.path, off, size, ErrOutOfRange)
	}
	l.size.Store(off)
	if err := l.truncateFile(off); err != nil {
		l.set.Fail(err)
		return err
	}
	return nil
}

// ReadAt reads and verifies the record at off, which must be a record
// boundary below Size.
func (l *Log) ReadAt(off int64) (Record, error) {
	if l.closed.Load() {
		return Record{}, fmt.Errorf("turnlog: read %s at %d: %w", l.path, off, ErrClosed)
	}
	if size := l.size.Load(); off < 0 || off+RecordSize > size || off%RecordSize != 0 {
		return Record{}, fmt.Errorf("turnlog: read %s at %d (size %d): %w", l.path, off, size, ErrOutOfRange)
	}
	var b [RecordSize]byte
	if _, err := l.set.ReadAt(b[:], off); err != nil {
		if errors.Is(err, io.EOF) {
			err = ErrOutOfRange // cut by a concurrent Truncate
		}
		return Record{}, fmt.Errorf("turnlog: read %s at %d: %w", l.path, off, err)
	}
	r, err := UnmarshalRecord(b[:])
	if err != nil {
		return Record{}, fmt.Errorf("turnlog: read %s at %d: %w", l.path, off, err)
	}
	return r, nil
}

// Close closes the log, waiting for a running Append or Truncate. Reads
// after Close fail with ErrClosed.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.closed.Swap(true) {
		return nil
	}
	if err := l.set.Close(); err != nil {
		return fmt.Errorf("turnlog: close %s: %w", l.path, err)
	}
	return nil
}

// Rollover closes the active segment at the log's end and starts the next
// one there (segment.Set.Rollover), unless the active segment holds no
// record; it reports whether it closed one, which OnRollover is told of.
func (l *Log) Rollover() (bool, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writable(); err != nil {
		return false, err
	}
	rolled, err := l.set.Rollover(l.size.Load())
	if err != nil {
		return false, fmt.Errorf("turnlog: roll over %s: %w", l.path, err)
	}
	return rolled, nil
}

// Active returns the start of the active segment.
func (l *Log) Active() int64 { return l.set.Active().Start }

// ReplaceSegment puts id, a compaction's rewrite of a sealed segment
// (written, fsynced and named by the caller's records), in place of the
// generation the log holds, and returns the old one, whose file the
// caller removes (see segment.Set.Replace).
func (l *Log) ReplaceSegment(id segment.ID) (segment.Info, error) {
	old, err := l.set.Replace(id)
	if err != nil {
		return old, fmt.Errorf("turnlog: %w", err)
	}
	return old, nil
}
