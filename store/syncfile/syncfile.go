// Package syncfile holds the few file-system calls the store's append-only
// files need for durability and ownership: flushing a file's data, making a
// directory entry durable, locking a file against a second process, and
// keeping zeros written ahead of a file's end (Reserve) so that flushing
// its data is cheap.
package syncfile

import (
	"fmt"
	"os"
)

// Dir fsyncs a directory, so that files created or renamed in it survive a
// crash.
func Dir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
