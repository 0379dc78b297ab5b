package server_test

import (
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
)

// Session ids tell a client nothing of the sessions others open: they
// are not counted up across sessions.
func TestSessionIDsAreNotCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seen := map[uint64]bool{}
	var last uint64
	for i := range 8 {
		id := e.dial(client.WithClientTag("probe")).SessionID()
		if id == 0 || seen[id] {
			t.Fatalf("session %d got id %d, seen before or 0", i, id)
		}
		// Counted ids would differ by a small step; 8 random ones do so
		// with a chance of about 8/2^44.
		if i > 0 && (id-last < 1<<20 || last-id < 1<<20) {
			t.Errorf("session ids %d then %d: counted", last, id)
		}
		seen[id], last = true, id
	}
}
