package live

import "strconv"

// idString renders an id as CXDB's HTTP JSON does: a decimal string.
func idString(id uint64) string { return strconv.FormatUint(id, 10) }
