package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cardboxhq/cardbox/store/syncfile"
)

// Options configure Open.
type Options struct {
	// MaxSize bounds a segment: a write that would take a non-empty
	// active segment past it goes to a new segment. A single write larger
	// than MaxSize gets a segment of its own. Zero: one unbounded
	// segment, the single file of earlier versions.
	MaxSize int64

	// Reserve, when > 0, keeps zeros written ahead of the active
	// segment's data, this many bytes at a time (see syncfile.Reserve).
	Reserve int64

	// OnRollover, if set, is told of each segment that a rollover
	// closed, with the writer's lock held: it must return at once (wake
	// a goroutine that seals it, say).
	OnRollover func(Info)

	// ReadOnly opens the files for reading only, without locking them,
	// and does not create a missing stream: for an offline check of a
	// stopped store. Write and Truncate fail.
	ReadOnly bool
}

// file is one open segment file.
type file struct {
	id   ID
	path string
	f    *os.File
	// length is the file's size for a closed segment: fixed. For the
	// active segment it is its size when opened or last cut, and the
	// writer's offsets, not length, say where its data ends.
	length int64
}

// Set is a stream kept in segment files: it reads at logical offsets
// from any of them and appends to the last.
//
// ReadAt, ZeroTail, Size, Segments and Closed are safe for concurrent use
// with each other and with the writer's calls. Write, Truncate, Fail and
// Close are meant for a single writer; concurrent calls are serialized.
type Set struct {
	layout Layout
	opts   Options
	files  atomic.Pointer[[]*file] // by start; the last is the active segment

	wmu sync.Mutex         // serializes the writer's calls; guards below
	app *syncfile.Appender // of the active segment; nil when ReadOnly
	// failed is a sticky failure of the set itself (a rollover that
	// could not cut the closed segment); the appender keeps its own.
	failed error
}

// Open opens the stream's segments in layout.Dir, creating the directory
// and the first segment when there are none (unless Options.ReadOnly),
// and checks that they are contiguous from offset 0: each segment but
// the last must be exactly as long as the distance to the next. It cuts
// nothing: the caller's recovery decides where the data ends (Size is
// where the files end) and cuts with Truncate.
func Open(layout Layout, opts Options) (*Set, error) {
	s := &Set{layout: layout, opts: opts}
	ids, err := layout.List()
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		if opts.ReadOnly {
			return nil, fmt.Errorf("segment: open %s: %w", layout.Path(ID{}), os.ErrNotExist)
		}
		if err := s.create(ID{}); err != nil {
			return nil, err
		}
	} else if err := s.openAll(ids); err != nil {
		return nil, errors.Join(err, s.closeFiles())
	}
	if !opts.ReadOnly {
		last := s.last()
		s.app = syncfile.NewAppender(last.f, last.length, opts.Reserve)
	}
	return s, nil
}

func (s *Set) openAll(ids []ID) error {
	flag := os.O_RDWR
	if s.opts.ReadOnly {
		flag = os.O_RDONLY
	}
	files := make([]*file, 0, len(ids))
	s.files.Store(&files)
	for i, id := range ids {
		path := s.layout.Path(id)
		f, err := os.OpenFile(path, flag, 0)
		if err != nil {
			return fmt.Errorf("segment: open: %w", err)
		}
		files = append(files, &file{id: id, path: path, f: f})
		s.files.Store(&files)
		if !s.opts.ReadOnly {
			if err := syncfile.Lock(f); err != nil {
				return fmt.Errorf("segment: lock %s: %w", path, err)
			}
		}
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("segment: open: %w", err)
		}
		files[i].length = fi.Size()
	}
	if files[0].id.Start != 0 {
		return fmt.Errorf("segment: the first segment, %s, starts at %d, not 0: %w", files[0].path, files[0].id.Start, ErrCorrupt)
	}
	for i := 0; i+1 < len(files); i++ {
		if cur, next := files[i], files[i+1]; !fits(cur.id, cur.length, next.id.Start) {
			return fmt.Errorf("segment: %s ends at %d but the next segment, %s, starts at %d (files left untouched): %w",
				cur.path, cur.id.Start+cur.length, next.path, next.id.Start, ErrCorrupt)
		}
	}
	return nil
}

// fits reports whether a closed segment of length bytes fits before the
// segment starting at next: exactly for a segment written by appends;
// for a rewrite, which packs its records at the start of its range, at
// or below it (the rest of the range is a gap that holds nothing).
func fits(id ID, length, next int64) bool {
	end := id.Start + length
	if id.Gen == 0 {
		return end == next
	}
	return end <= next
}

// create creates the file of segment id, empty, as the new last segment,
// and fsyncs the directory.
func (s *Set) create(id ID) error {
	if err := os.MkdirAll(s.layout.Dir, 0o755); err != nil {
		return fmt.Errorf("segment: create: %w", err)
	}
	path := s.layout.Path(id)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("segment: create: %w", err)
	}
	if err := syncfile.Lock(f); err != nil {
		f.Close()
		return fmt.Errorf("segment: lock %s: %w", path, err)
	}
	if err := syncfile.Dir(s.layout.Dir); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("segment: create %s: %w", path, err)
	}
	var files []*file
	if old := s.files.Load(); old != nil {
		files = append(files, *old...)
	}
	files = append(files, &file{id: id, path: path, f: f})
	s.files.Store(&files)
	return nil
}

func (s *Set) list() []*file {
	if p := s.files.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *Set) last() *file {
	files := s.list()
	return files[len(files)-1]
}

// Size returns where the files end: the active segment's start plus its
// file's size when opened or last cut (reservation and torn bytes
// included). Recovery reads up to it.
func (s *Set) Size() int64 {
	last := s.last()
	return last.id.Start + last.length
}

// Segments describes every segment, closed ones first; the active one's
// Length is its file's size when opened or last cut.
func (s *Set) Segments() []Info {
	files := s.list()
	infos := make([]Info, len(files))
	for i, f := range files {
		infos[i] = Info{ID: f.id, Path: f.path, Length: f.length}
	}
	return infos
}

// Closed describes the closed segments: every one but the active.
func (s *Set) Closed() []Info {
	infos := s.Segments()
	return infos[:len(infos)-1]
}

// Active returns the active segment's id.
func (s *Set) Active() ID { return s.last().id }

// find returns the segment holding logical offset off.
func find(files []*file, off int64) *file {
	i := sort.Search(len(files), func(i int) bool { return files[i].id.Start > off })
	if i == 0 {
		return nil
	}
	return files[i-1]
}

// ReadAt reads len(b) bytes of the stream at logical offset off, from as
// many segments as they span (records never span two; a scan may). It
// returns io.EOF past the end of the files, and for bytes a concurrent
// Truncate or Replace removed; an error wrapping ErrGap for bytes in the
// gap after a rewritten segment.
func (s *Set) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("segment: read %s at %d: negative offset", s.layout.Base, off)
	}
	files := s.list()
	n := 0
	for n < len(b) {
		seg := find(files, off)
		if seg == nil {
			return n, io.EOF
		}
		want := b[n:]
		if seg != files[len(files)-1] {
			end := seg.id.Start + seg.length
			if off >= end {
				return n, fmt.Errorf("segment: read %s at %d, past %s's %d bytes: %w",
					s.layout.Base, off, seg.path, seg.length, ErrGap)
			}
			want = want[:min(int64(len(want)), end-off)]
		}
		m, err := seg.f.ReadAt(want, off-seg.id.Start)
		n += m
		off += int64(m)
		if errors.Is(err, os.ErrClosed) {
			return n, io.EOF // its segment was cut away meanwhile
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// ZeroTail reports whether the stream's bytes from off to size are all
// zero: unused reservation rather than a torn write.
func (s *Set) ZeroTail(off, size int64) (bool, error) {
	for _, seg := range s.list() {
		from, to := max(off, seg.id.Start), min(size, seg.id.Start+seg.length)
		if seg == s.last() {
			to = size
		}
		if from >= to {
			continue
		}
		zero, err := syncfile.ZeroTail(seg.f, from-seg.id.Start, to-seg.id.Start)
		if err != nil || !zero {
			return false, err
		}
	}
	return true, nil
}

// Err is the sticky failure after which every write fails, or nil.
func (s *Set) Err() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.errLocked()
}

func (s *Set) errLocked() error {
	switch {
	case s.opts.ReadOnly:
		return fmt.Errorf("segment: %s opened read-only", s.layout.Base)
	case s.failed != nil:
		return s.failed
	}
	return s.app.Err()
}

// Fail makes the stream unusable until it is reopened: the caller found
// it in a state only reopening sorts out.
func (s *Set) Fail(err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.failed == nil {
		s.failed = err
	}
}

// Write writes buf at logical offset off, the stream's data end, and
// makes it durable (see syncfile.Appender: on error nothing of buf stays,
// and a full disk is no sticky failure). It rolls over to a new segment
// first when buf would take a non-empty active segment past MaxSize.
func (s *Set) Write(buf []byte, off int64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.errLocked(); err != nil {
		return err
	}
	last := s.last()
	if off < last.id.Start {
		return fmt.Errorf("segment: write at %d, before the active segment %s (from %d)", off, last.path, last.id.Start)
	}
	if limit := s.opts.MaxSize; limit > 0 && off > last.id.Start && off-last.id.Start+int64(len(buf)) > limit {
		if err := s.rollover(off); err != nil {
			return err
		}
		last = s.last()
	}
	return s.app.Write(buf, off-last.id.Start)
}

// Rollover closes the active segment at end, its data end, and starts the
// next one there, as a write past MaxSize would: the closed segment can
// then be sealed and compacted (a compaction that must erase bytes of the
// active segment within a bound). An empty active segment (end at its
// start) is left as it is, and Rollover reports false.
func (s *Set) Rollover(end int64) (bool, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.errLocked(); err != nil {
		return false, err
	}
	last := s.last()
	switch {
	case end < last.id.Start:
		return false, fmt.Errorf("segment: roll over at %d, before the active segment %s (from %d)", end, last.path, last.id.Start)
	case end == last.id.Start:
		return false, nil
	}
	if err := s.rollover(end); err != nil {
		return false, err
	}
	return true, nil
}

// rollover closes the active segment at end, its data end, and starts
// the next one there.
func (s *Set) rollover(end int64) error {
	old := s.last()
	length := end - old.id.Start
	s.app.Close() // no reservation may grow the file once it is cut
	if err := old.f.Truncate(length); err != nil {
		s.failed = fmt.Errorf("segment: close %s at %d: %w", old.path, length, err)
		return s.failed
	}
	if err := old.f.Sync(); err != nil {
		s.failed = fmt.Errorf("segment: close %s: sync: %w", old.path, err)
		return s.failed
	}
	if err := s.create(ID{Start: end}); err != nil {
		// The closed segment stays the active one, without its
		// reservation; the next write tries again.
		s.app = syncfile.NewAppender(old.f, length, s.opts.Reserve)
		return err
	}
	closed := Info{ID: old.id, Path: old.path, Length: length}
	s.setLength(old, length)
	s.app = syncfile.NewAppender(s.last().f, 0, s.opts.Reserve)
	if s.opts.OnRollover != nil {
		s.opts.OnRollover(closed)
	}
	return nil
}

// setLength publishes a segment's new length to readers (a copy of the
// list with a copy of the segment: readers hold the old ones).
func (s *Set) setLength(seg *file, length int64) {
	old := s.list()
	files := make([]*file, len(old))
	for i, f := range old {
		if f == seg {
			c := *f
			c.length = length
			f = &c
		}
		files[i] = f
	}
	s.files.Store(&files)
}

// Truncate cuts the stream at logical offset off and makes the cut
// durable: segments that start past off are removed, last first, the
// directory fsynced, and the segment holding off becomes the active one,
// cut there with its reservation. A segment that starts at off stays,
// empty: the one before it is closed, and may be sealed, so no write
// may go to it again.
func (s *Set) Truncate(off int64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.opts.ReadOnly {
		return s.errLocked()
	}
	if s.failed != nil {
		return s.failed
	}
	files := s.list()
	keep := len(files)
	for keep > 1 && files[keep-1].id.Start > off {
		keep--
	}
	if keep < len(files) {
		if err := s.removeFrom(keep); err != nil {
			return err
		}
	}
	if err := s.app.Truncate(off - s.last().id.Start); err != nil {
		s.app.Fail(err)
		return fmt.Errorf("segment: truncate %s at %d: %w", s.last().path, off-s.last().id.Start, err)
	}
	s.setLength(s.last(), off-s.last().id.Start)
	return nil
}

// removeFrom removes the segments from index keep on, last first, and
// makes the one before them active.
func (s *Set) removeFrom(keep int) error {
	s.app.Close()
	files := s.list()
	for i := len(files) - 1; i >= keep; i-- {
		seg := files[i]
		if err := os.Remove(seg.path); err != nil {
			s.failed = fmt.Errorf("segment: remove %s: %w", seg.path, err)
			return s.failed
		}
		rest := files[:i:i]
		s.files.Store(&rest)
		seg.f.Close()
	}
	if err := syncfile.Dir(s.layout.Dir); err != nil {
		s.failed = fmt.Errorf("segment: remove segments of %s: %w", s.layout.Base, err)
		return s.failed
	}
	last := s.last()
	s.app = syncfile.NewAppender(last.f, last.length, s.opts.Reserve)
	return nil
}

// Replace puts id, a new generation of a closed segment, in place of the
// generation the set holds: the caller has written and fsynced its file
// (and the directory) and made it the one its records name. The old
// file is closed, not removed: removing it is the caller's last step,
// and a start that finds both keeps the one the caller's records name.
// Readers that still hold the old file read io.EOF from then on.
func (s *Set) Replace(id ID) (old Info, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.opts.ReadOnly {
		return Info{}, s.errLocked()
	}
	files := s.list()
	i := slices.IndexFunc(files, func(f *file) bool { return f.id.Start == id.Start })
	switch {
	case i < 0:
		return Info{}, fmt.Errorf("segment: replace %s: no segment of %s starts at %d", s.layout.Name(id), s.layout.Base, id.Start)
	case i == len(files)-1:
		return Info{}, fmt.Errorf("segment: replace %s: the active segment is never rewritten", s.layout.Name(id))
	case id.Gen <= files[i].id.Gen:
		return Info{}, fmt.Errorf("segment: replace %s with generation %d: not newer", files[i].path, id.Gen)
	}
	path := s.layout.Path(id)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return Info{}, fmt.Errorf("segment: replace: %w", err)
	}
	length, err := lockedSize(f)
	if err != nil {
		f.Close()
		return Info{}, fmt.Errorf("segment: replace with %s: %w", path, err)
	}
	if !fits(id, length, files[i+1].id.Start) {
		f.Close()
		return Info{}, fmt.Errorf("segment: replace with %s: %d bytes do not fit before %d: %w",
			path, length, files[i+1].id.Start, ErrCorrupt)
	}
	prev := files[i]
	next := slices.Clone(files)
	next[i] = &file{id: id, path: path, f: f, length: length}
	s.files.Store(&next)
	old = Info{ID: prev.id, Path: prev.path, Length: prev.length}
	if err := prev.f.Close(); err != nil {
		return old, fmt.Errorf("segment: replace: close %s: %w", prev.path, err)
	}
	return old, nil
}

// lockedSize locks f as every segment file of a writable set is locked,
// and returns its size.
func lockedSize(f *os.File) (int64, error) {
	if err := syncfile.Lock(f); err != nil {
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Close stops the active segment's reservation and closes every file.
// Reads after Close fail.
func (s *Set) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.app != nil {
		s.app.Close()
	}
	return s.closeFiles()
}

func (s *Set) closeFiles() error {
	var errs []error
	for _, seg := range s.list() {
		if err := seg.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("segment: close %s: %w", s.layout.Base, err)
	}
	return nil
}

// Span describes the segment holding logical offset off, for a reader
// that walks the stream record by record: end is where its bytes end (a
// closed segment's start plus its length; -1 for the active segment,
// whose data end is the caller's to know), next the start of the
// segment after it. For a rewritten segment end may lie before next:
// the bytes between are its gap, which holds nothing, and a walk goes on
// at next. ok is false for an offset before the first segment.
func (s *Set) Span(off int64) (id ID, end, next int64, ok bool) {
	files := s.list()
	i := sort.Search(len(files), func(i int) bool { return files[i].id.Start > off })
	if i == 0 {
		return ID{}, 0, 0, false
	}
	seg := files[i-1]
	if i == len(files) {
		return seg.id, -1, -1, true
	}
	return seg.id, seg.id.Start + seg.length, files[i].id.Start, true
}

// SkipGap returns off, or the start of the next segment when off lies in
// the gap after a rewritten segment (at or past its bytes' end), skipping
// as many empty rewrites as follow.
func (s *Set) SkipGap(off int64) int64 {
	for {
		_, end, next, ok := s.Span(off)
		if !ok || end < 0 || off < end {
			return off
		}
		off = next
	}
}

// Limit returns where the bytes a reader at off may read in one go end:
// the end of a closed segment's bytes, or size for the active one.
func (s *Set) Limit(off, size int64) int64 {
	if _, end, _, ok := s.Span(off); ok && end >= 0 {
		return min(end, size)
	}
	return size
}
