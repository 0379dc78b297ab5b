//go:build linux

package syncfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// Data flushes f's data and the metadata needed to read it back (including
// its size) with fdatasync(2).
func Data(f *os.File) error {
	return control(f, func(fd int) error { return unix.Fdatasync(fd) })
}

// Lock takes an exclusive, non-blocking flock(2) on f. The lock goes away
// when f is closed or the process dies.
func Lock(f *os.File) error {
	return control(f, func(fd int) error { return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) })
}

func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) { opErr = fn(int(fd)) }); err != nil {
		return err
	}
	return opErr
}

// startWriteback asks the kernel to start writing f's dirty pages in
// [off, off+n) to disk, without waiting and without flushing the device
// cache (sync_file_range(2)); it is a hint, so errors are ignored.
func startWriteback(f *os.File, off, n int64) {
	_ = control(f, func(fd int) error { return unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE) })
}

// waitWriteback writes f's dirty pages in [off, off+n) to disk and waits
// until they are written, without flushing the device cache or any
// metadata (sync_file_range(2)); it is a pacing step, not a durability
// one, so errors are ignored (the file's fsync reports them).
func waitWriteback(f *os.File, off, n int64) {
	_ = control(f, func(fd int) error {
		return unix.SyncFileRange(fd, off, n,
			unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	})
}
