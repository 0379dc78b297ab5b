//go:build !linux

package syncfile

import "os"

// Data flushes f to stable storage.
func Data(f *os.File) error { return f.Sync() }

// Lock is a no-op outside Linux; a single process must own the directory.
func Lock(*os.File) error { return nil }

// startWriteback is a no-op outside Linux.
func startWriteback(*os.File, int64, int64) {}

// waitWriteback is a no-op outside Linux.
func waitWriteback(*os.File, int64, int64) {}
