// Package datadir gives one process at a time ownership of a data
// directory. The server takes the lock before it starts, adopts, migrates
// or fences anything, so a second server on the same directory exits at
// once without touching the first one's Postgres or files; offline tools
// (recover, verify, migrate without a server) take it too. Tools that work
// beside a running server (key administration, sample data, SQL access)
// do not.
package datadir

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// LockFile is the lock's file name inside the data directory. It holds a
// description of the owner (pid and role) for the message a second
// process prints; the flock on it, not its content, is the lock.
const LockFile = "cardbox.lock"

// ErrLocked is returned (wrapped, with the owner's description) when
// another process owns the directory.
var ErrLocked = errors.New("data directory in use")

// Lock is a held data directory lock. Release it with Unlock; the kernel
// also drops it when the process dies, so a killed owner leaves no stale
// lock behind.
type Lock struct {
	f   *os.File
	dir string
}

// Acquire creates dir if needed and takes its lock without waiting. owner
// describes this process (e.g. "cardboxd serving 127.0.0.1:9009") and is
// recorded for others to read. If another process holds the lock, the
// error wraps ErrLocked and names that process.
func Acquire(dir, owner string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	if err := flock(f); err != nil {
		holder := readOwner(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is owned by %s; stop it first (or use another --data-dir)", ErrLocked, dir, holder)
		}
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	if err := writeOwner(f, owner); err != nil {
		f.Close()
		return nil, fmt.Errorf("data directory lock %s: %w", path, err)
	}
	return &Lock{f: f, dir: dir}, nil
}

// Dir returns the locked directory.
func (l *Lock) Dir() string { return l.dir }

// Unlock releases the lock. The file stays: removing it would let a third
// process lock a new file while a second still holds the old one.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := l.f.Close()
	l.f = nil
	return err
}

// Owner returns the description recorded by the process that holds (or
// last held) the lock of dir, or "" if there is none.
func Owner(dir string) string {
	f, err := os.Open(filepath.Join(dir, LockFile))
	if err != nil {
		return ""
	}
	defer f.Close()
	return readOwner(f)
}

func flock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) {
		opErr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
	}); err != nil {
		return err
	}
	return opErr
}

func writeOwner(f *os.File, owner string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt(fmt.Appendf(nil, "pid %d: %s\n", os.Getpid(), owner), 0)
	return err
}

func readOwner(f *os.File) string {
	b := make([]byte, 512)
	n, _ := f.ReadAt(b, 0)
	s := strings.TrimSpace(string(bytes.ToValidUTF8(b[:n], nil)))
	if s == "" {
		return "another process"
	}
	return s
}
