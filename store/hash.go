package store

import (
	"sync"

	"github.com/zeebo/blake3"
)

// hashers keeps BLAKE3 hashers on the heap. blake3.Sum256 of more than one
// 1 KiB chunk puts its ~9 KiB hasher on the stack, and every request runs
// on a fresh goroutine whose small stack then has to grow and be copied:
// that cost more than the hashing itself.
var hashers = sync.Pool{New: func() any { return blake3.New() }}

// HashOf returns the BLAKE3-256 of b, the content hash of a payload.
func HashOf(b []byte) Hash { return hashOf(b) }

// hashOf returns the BLAKE3-256 of b.
func hashOf(b []byte) Hash {
	h := hashers.Get().(*blake3.Hasher)
	defer hashers.Put(h)
	h.Reset()
	_, _ = h.Write(b)
	var sum Hash
	h.Sum(sum[:0])
	return sum
}
