//go:build !linux

package turnlog

import "os"

// syncData flushes f to stable storage.
func syncData(f *os.File) error { return f.Sync() }

// lockFile is a no-op outside Linux; a single process must own the directory.
func lockFile(*os.File) error { return nil }
