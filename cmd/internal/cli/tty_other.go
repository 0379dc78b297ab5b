//go:build !linux

package cli

import "os"

// isTerminal reports whether f is a character device other than
// /dev/null: a terminal, most likely.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}
