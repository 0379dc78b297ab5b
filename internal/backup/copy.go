package backup

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/zeebo/blake3"
	"golang.org/x/time/rate"
)

// chunk is how much one read and one write of a copy move.
const chunk = 1 << 20

// limiter paces a backup: WaitN returns once n more bytes may be moved,
// n at most Burst. A *rate.Limiter is one; tests give one on a clock of
// their own.
type limiter interface {
	WaitN(ctx context.Context, n int) error
	Burst() int
}

// newLimiter returns a limiter of bytesPerSecond (0: no limit), with a
// burst of one chunk.
func newLimiter(bytesPerSecond int64) *rate.Limiter {
	if bytesPerSecond <= 0 {
		return rate.NewLimiter(rate.Inf, chunk)
	}
	return rate.NewLimiter(rate.Limit(bytesPerSecond), chunk)
}

// copier copies byte ranges of the data directory's files into the
// backup's data/ directory as segment files, no faster than its limiter
// allows (counting each byte once, as it is read and written), counting
// what it copied.
type copier struct {
	dest    string // the backup directory
	limit   limiter
	segSize int64
	copied  atomic.Int64 // bytes written into the backup
	buf     []byte
}

func newCopier(dest string, limit limiter, segSize int64) *copier {
	return &copier{dest: dest, limit: limit, segSize: segSize, buf: make([]byte, min(chunk, limit.Burst()))}
}

// copyFile backs up src's bytes piece by piece, reusing the pieces of
// prev (the same file in the previous backup) that cover the same bytes:
// all of them when src is a sealed segment prev holds with the same
// BLAKE3, else those of the same source file (by device and inode). A
// sealed segment backed up anew is checked against its BLAKE3, so that
// a segment damaged on disk fails the backup instead of living on in it.
func (c *copier) copyFile(ctx context.Context, src source, prev *File) (File, error) {
	rel, size := src.rel, src.size
	f, err := os.Open(src.path)
	if err != nil {
		return File{}, fmt.Errorf("back up %s: %w", rel, err)
	}
	defer f.Close()
	out := File{Path: rel, Size: size, Sealed: src.sealed}
	if fi, err := f.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			out.Device, out.Inode = uint64(st.Dev), uint64(st.Ino)
		}
		if fi.Size() < size {
			return File{}, fmt.Errorf("back up %s: the file holds %d bytes, fewer than the %d below its stream's committed end", rel, fi.Size(), size)
		}
	}
	if src.sealed != "" && prev != nil && prev.Sealed == src.sealed && prev.Size == size && c.presentAll(prev.Segments) {
		out.Segments = prev.Segments
		return out, nil
	}
	reusable := map[int64]Segment{}
	if prev != nil && prev.Device == out.Device && prev.Inode == out.Inode {
		for _, s := range prev.Segments {
			reusable[s.Offset] = s
		}
	}
	for off, i := int64(0), 0; off < size; off, i = off+c.segSize, i+1 {
		n := min(c.segSize, size-off)
		if s, ok := reusable[off]; ok && s.Size == n && c.present(s.Blob) {
			out.Segments = append(out.Segments, s)
			continue
		}
		s, err := c.copySegment(ctx, f, rel, i, off, n)
		if err != nil {
			return File{}, err
		}
		out.Segments = append(out.Segments, s)
	}
	if src.sealed != "" {
		if err := c.checkSealed(ctx, out); err != nil {
			return File{}, err
		}
	}
	return out, nil
}

// checkSealed hashes the backup's pieces of a sealed segment, as the
// backup now holds them, against the BLAKE3 it was sealed with.
func (c *copier) checkSealed(ctx context.Context, f File) error {
	h := blake3.New()
	for _, s := range f.Segments {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := hashInto(h, filepath.Join(c.dest, s.Name)); err != nil {
			return fmt.Errorf("back up %s: %w", f.Path, err)
		}
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != f.Sealed {
		return fmt.Errorf("back up %s: the sealed segment's bytes hash to %s, but it was sealed with BLAKE3 %s: "+
			"it changed on disk since (run cardbox verify; restore it from an earlier backup)", f.Path, sum, f.Sealed)
	}
	return nil
}

// presentAll reports whether the backup still holds every piece of segs.
func (c *copier) presentAll(segs []Segment) bool {
	for _, s := range segs {
		if !c.present(s.Blob) {
			return false
		}
	}
	return true
}

// present reports whether the backup still holds b at its size (its hash
// is checked by every restore).
func (c *copier) present(b Blob) bool {
	fi, err := os.Stat(filepath.Join(c.dest, b.Name))
	return err == nil && fi.Size() == b.Size
}

// copySegment copies [off, off+n) of f into a new segment file, named
// after its file, index and hash, written under a temporary name,
// fsynced and renamed: a segment file is whole or absent.
func (c *copier) copySegment(ctx context.Context, f *os.File, rel string, index int, off, n int64) (Segment, error) {
	tmp, err := os.CreateTemp(filepath.Join(c.dest, dataDir), "segment-*"+tmpSuffix)
	if err != nil {
		return Segment{}, fmt.Errorf("back up %s: %w", rel, err)
	}
	defer os.Remove(tmp.Name()) // after the rename: no such file
	defer tmp.Close()
	h := blake3.New()
	w := io.MultiWriter(tmp, h)
	for done := int64(0); done < n; {
		m := min(int64(len(c.buf)), n-done)
		if err := c.limit.WaitN(ctx, int(m)); err != nil {
			return Segment{}, fmt.Errorf("back up %s: %w", rel, err)
		}
		if _, err := f.ReadAt(c.buf[:m], off+done); err != nil {
			return Segment{}, fmt.Errorf("back up %s: read at %d: %w", rel, off+done, err)
		}
		if _, err := w.Write(c.buf[:m]); err != nil {
			return Segment{}, fmt.Errorf("back up %s: %w", rel, err)
		}
		done += m
		c.copied.Add(m)
	}
	if err := tmp.Sync(); err != nil {
		return Segment{}, fmt.Errorf("back up %s: %w", rel, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	name := filepath.Join(dataDir, fmt.Sprintf("%s.%06d.%s", filepath.Base(rel), index, sum[:16]))
	if err := os.Rename(tmp.Name(), filepath.Join(c.dest, name)); err != nil {
		return Segment{}, fmt.Errorf("back up %s: %w", rel, err)
	}
	return Segment{Offset: off, Blob: Blob{Name: name, Size: n, BLAKE3: sum}}, nil
}
