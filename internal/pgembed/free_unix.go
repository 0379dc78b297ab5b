//go:build linux || darwin || freebsd

package pgembed

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// FreeBytes is the space left on the file system of the cluster's data
// directory for users other than root (postgres never runs as root), from
// statfs.
func (s *Server) FreeBytes() (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(s.dataDir(), &st); err != nil {
		return 0, fmt.Errorf("embedded postgres: free space: %w", err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
