package syncfile

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrNoSpace is a write that did not fit on the file system. The file was
// cut back to where the write began, so writes go on once space is free.
var ErrNoSpace = errors.New("no space left on device")

// Appender is the discipline of the store's append-only files (the blob
// pack and the turn log), in one place: a single writer writes at the data
// end; each write is made durable with fdatasync before it returns; a
// write that fails is cut back, so that the file is always records and
// then zeros; zeros are kept written ahead of the data end (Reserve) when
// asked. A failure it cannot undo (the cut back fails, or fdatasync fails
// for another reason than a full disk, after which the file's contents
// are unknown) is sticky: every later write fails until the file is
// reopened. A full disk is not sticky.
type Appender struct {
	f       *os.File
	reserve *Reserve // nil: no reservation
	failed  error
}

// NewAppender manages appends to f, whose data ends at size, keeping
// reserve bytes of zeros ahead of it (none if reserve <= 0).
func NewAppender(f *os.File, size, reserve int64) *Appender {
	a := &Appender{f: f}
	if reserve > 0 {
		a.reserve = NewReserve(f, size, reserve)
	}
	return a
}

// Err is the sticky failure, or nil while the file is usable.
func (a *Appender) Err() error { return a.failed }

// Write writes buf at off, the data end, and fsyncs it. On error nothing
// of buf is left in the file. An error wrapping ErrNoSpace means the disk
// was full and the file is usable.
func (a *Appender) Write(buf []byte, off int64) error {
	if a.failed != nil {
		return fmt.Errorf("%s unusable after an earlier failure (reopen it): %w", a.f.Name(), a.failed)
	}
	if a.reserve != nil {
		// A reservation that cannot grow (a full disk) must not stop a
		// write that may still fit: the reservation is an optimisation.
		_ = a.reserve.Ensure(off + int64(len(buf)))
	}
	if _, err := a.f.WriteAt(buf, off); err != nil {
		return a.undo(off, fmt.Errorf("write %d bytes at %d of %s: %w", len(buf), off, a.f.Name(), err))
	}
	if err := Data(a.f); err != nil {
		return a.undo(off, fmt.Errorf("sync %s: %w", a.f.Name(), err))
	}
	return nil
}

// undo cuts a failed write back to off. A full disk leaves the file
// usable once cut; anything else, or a failed cut, is sticky.
func (a *Appender) undo(off int64, err error) error {
	if terr := a.Truncate(off); terr != nil {
		a.failed = fmt.Errorf("%w; then cutting back to %d: %w", err, off, terr)
		return a.failed
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	a.failed = err
	return err
}

// Truncate cuts the file at off with its reservation and fsyncs it.
func (a *Appender) Truncate(off int64) error {
	if a.reserve != nil {
		return a.reserve.Truncate(off)
	}
	if err := a.f.Truncate(off); err != nil {
		return err
	}
	return a.f.Sync()
}

// Fail makes the file unusable: a caller found it in a state only
// reopening sorts out.
func (a *Appender) Fail(err error) { a.failed = err }

// Close stops the reservation; it does not close the file.
func (a *Appender) Close() {
	if a.reserve != nil {
		a.reserve.Close()
	}
}
