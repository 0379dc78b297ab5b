package cardbox

import (
	"github.com/cardboxhq/cardbox/internal/pgerr"
)

// Unavailable reports whether err means Postgres could not serve the call
// now (unreachable, shutting down, out of connections, timed out): the
// caller may retry later, and the request is not at fault.
func Unavailable(err error) bool { return pgerr.Unavailable(err) }

// DiskFull reports whether err means Postgres ran out of disk space.
func DiskFull(err error) bool { return pgerr.DiskFull(err) }
