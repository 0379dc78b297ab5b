// Package ident holds the identities every layer of cardbox shares: the
// tenant that owns each row and file record, and the content hash that
// names a blob. It imports nothing of cardbox, so that the store, the
// domains and the surfaces can all stand on it.
package ident

import (
	"sync"

	"github.com/zeebo/blake3"
)

// DefaultTenantID is the tenant sessions use when no authentication is
// configured.
const DefaultTenantID = "default"

// Tenant owns contexts, turns, blobs, cards and boxes. No is the compact
// number the turn store's local files record. Pass the turn store only
// tenants it returned (store.TurnStore.Tenant): its writers map numbers
// back to ids through the tenants it resolved.
type Tenant struct {
	ID string
	No uint32
}

// Hash is a BLAKE3-256 digest, the content address of a blob.
type Hash = [32]byte

// hashers keeps BLAKE3 hashers on the heap. blake3.Sum256 of more than one
// 1 KiB chunk puts its ~9 KiB hasher on the stack, and every request runs
// on a fresh goroutine whose small stack then has to grow and be copied:
// that cost more than the hashing itself.
var hashers = sync.Pool{New: func() any { return blake3.New() }}

// HashOf returns the BLAKE3-256 of b, the content hash of a payload.
func HashOf(b []byte) Hash {
	h := hashers.Get().(*blake3.Hasher)
	defer hashers.Put(h)
	h.Reset()
	_, _ = h.Write(b)
	var sum Hash
	h.Sum(sum[:0])
	return sum
}
