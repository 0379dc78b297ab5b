//go:build !(linux || darwin || freebsd)

package pgembed

import (
	"errors"
	"fmt"
)

// FreeBytes is the space left on the file system of the cluster's data
// directory; it is not known on this system.
func (s *Server) FreeBytes() (uint64, error) {
	return 0, fmt.Errorf("embedded postgres: free space: %w", errors.ErrUnsupported)
}
