package cxdbhttp

import (
	"encoding/base64"
	"strconv"
)

// Turn cursors are opaque to clients: a direction ('o' older, 'n' newer)
// and the turn id the next page starts from, base64url-encoded.
func encodeTurnCursor(dir byte, id uint64) string {
	return base64.RawURLEncoding.EncodeToString(strconv.AppendUint([]byte{'t', dir}, id, 10))
}

func decodeTurnCursor(s string) (dir byte, id uint64, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 3 || raw[0] != 't' || (raw[1] != 'o' && raw[1] != 'n') {
		return 0, 0, false
	}
	id, err = strconv.ParseUint(string(raw[2:]), 10, 64)
	return raw[1], id, err == nil && id != 0
}
