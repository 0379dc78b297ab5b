package syncfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Reserve keeps zero-filled space written ahead of the data end of an
// append-only file with a single writer. Appends then overwrite blocks
// that already exist on disk, so the fdatasync after each one flushes data
// only: no blocks to allocate and no new size or extent map to write (or
// to journal). On ext4 that makes the fdatasync on every group commit
// markedly cheaper, in latency and in CPU.
//
// The file therefore ends with zeros past its data. Readers of the file
// after a crash tell the zeros from a torn record with ZeroTail.
//
// The reservation grows a chunk at a time, in a goroutine Reserve owns,
// when less than half a chunk is left; the writer extends it in line only
// if it outruns that goroutine. Close and Truncate wait for it.
type Reserve struct {
	f     *os.File
	chunk int64

	mu        sync.Mutex
	grown     *sync.Cond // signalled when an extension ends
	allocated int64      // the file's size: data, then zeros
	extending bool       // the goroutine is extending the file
	closed    bool
	wg        sync.WaitGroup
}

// NewReserve manages the reservation of f, whose current size is size,
// growing it chunk bytes at a time (chunk > 0).
func NewReserve(f *os.File, size, chunk int64) *Reserve {
	r := &Reserve{f: f, chunk: chunk, allocated: size}
	r.grown = sync.NewCond(&r.mu)
	return r
}

// Ensure makes the file at least end bytes long, zeros past its data, so
// that the writer can write below end; the caller is the single writer.
// It starts growing the reservation in the background when less than half
// a chunk would be left.
func (r *Reserve) Ensure(end int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.extending && end > r.allocated {
		r.grown.Wait()
	}
	if end > r.allocated {
		to := end + r.chunk
		if err := zeroFill(r.f, r.allocated, to); err != nil {
			return fmt.Errorf("reserve %s up to %d: %w", r.f.Name(), to, err)
		}
		r.allocated = to
	}
	if r.allocated-end < r.chunk/2 && !r.extending && !r.closed {
		r.extending = true
		from, to := r.allocated, r.allocated+r.chunk
		r.wg.Go(func() { r.extend(from, to) })
	}
	return nil
}

// extend zero-fills [from, to) in the background. A failure only leaves the
// reservation where it was: the writer's next in-line extension reports it.
func (r *Reserve) extend(from, to int64) {
	err := zeroFill(r.f, from, to)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.allocated = to
	}
	r.extending = false
	r.grown.Broadcast()
}

// Truncate cuts the file at off, dropping the data past it and the
// reservation, and fsyncs it. It waits for a running extension first.
func (r *Reserve) Truncate(off int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.extending {
		r.grown.Wait()
	}
	if err := r.f.Truncate(off); err != nil {
		return err
	}
	r.allocated = off
	return r.f.Sync()
}

// Close waits for a running extension and stops further ones; it does not
// close the file.
func (r *Reserve) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
}

// zeroChunk is the unit zeroFill writes (and starts writing back) at a time.
const zeroChunk = 1 << 20

var zeros = make([]byte, zeroChunk)

// zeroFill writes zeros over [from, to) and fsyncs the file, which makes
// its new size durable. Each piece is handed to writeback as soon as it is
// written, so that a concurrent fdatasync of the file's data does not find
// megabytes of dirty zeros to flush.
func zeroFill(f *os.File, from, to int64) error {
	for off := from; off < to; off += zeroChunk {
		n := min(zeroChunk, to-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		startWriteback(f, off, n)
	}
	return f.Sync()
}

// ZeroTail reports whether the bytes of f from off to size are all zero:
// unused reservation rather than a torn write.
func ZeroTail(f *os.File, off, size int64) (bool, error) {
	buf := make([]byte, min(zeroChunk, max(size-off, 0)))
	for off < size {
		n := min(int64(len(buf)), size-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("read %s at %d: %w", f.Name(), off, err)
		}
		if !bytes.Equal(buf[:n], zeros[:n]) {
			return false, nil
		}
		off += n
	}
	return true, nil
}
