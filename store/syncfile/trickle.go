package syncfile

import (
	"fmt"
	"os"
)

// Trickle writes a file sequentially and hands its data to the disk a
// step at a time as it goes, instead of leaving it all dirty in the page
// cache for one large flush at the end. Every step bytes written, it
// starts the writeback of the step just written and waits for that of
// the step before, so that at most two steps are ever dirty or in
// flight. A large flush at once (the kernel's when the dirty pages pass
// its threshold, or an fsync of the whole file) queues hundreds of
// megabytes ahead of every other file's fdatasync on the same disk, the
// group commits of appends included, and stalls them for as long; small
// steps leave the disk to them between steps. (PostgreSQL's
// checkpoint_flush_after does the same for its checkpoints.)
//
// It makes nothing durable: the file still needs its fsync (Data or
// os.File.Sync) before anything relies on it. Outside Linux it is a
// plain writer.
type Trickle struct {
	f    *os.File
	step int64
	// off is where the next write goes; started is where the step not
	// yet handed to writeback begins.
	off, started int64
}

// NewTrickle writes f from its offset off on, flushing step bytes at a
// time (step > 0).
func NewTrickle(f *os.File, off, step int64) *Trickle {
	return &Trickle{f: f, step: step, off: off, started: off}
}

// Write writes p at the file's next offset, then hands every whole step
// written to writeback, waiting for the one before it.
func (t *Trickle) Write(p []byte) (int, error) {
	n, err := t.f.WriteAt(p, t.off)
	t.off += int64(n)
	if err != nil {
		return n, fmt.Errorf("write %s: %w", t.f.Name(), err)
	}
	for t.off-t.started >= t.step {
		startWriteback(t.f, t.started, t.step)
		if prev := t.started - t.step; prev >= 0 {
			waitWriteback(t.f, prev, t.step)
		}
		t.started += t.step
	}
	return n, nil
}
