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
