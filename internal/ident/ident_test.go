package ident

import (
	"bytes"
	"sync"
	"testing"

	"github.com/zeebo/blake3"
)

func TestHashOfIsBLAKE3(t *testing.T) {
	for _, n := range []int{0, 1, 1023, 1024, 1025, 4096, 70000} {
		b := bytes.Repeat([]byte{byte(n)}, n)
		if got, want := HashOf(b), Hash(blake3.Sum256(b)); got != want {
			t.Errorf("HashOf(%d bytes) = %x, want %x", n, got, want)
		}
	}
}

// BenchmarkHashOnFreshGoroutine hashes a 1 KiB+ payload on a new goroutine
// each time, as a request handler does.
func BenchmarkHashOnFreshGoroutine(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 1100)
	for _, tt := range []struct {
		name string
		hash func([]byte) Hash
	}{
		{"Sum256", func(p []byte) Hash { return blake3.Sum256(p) }},
		{"HashOf", HashOf},
	} {
		b.Run(tt.name, func(b *testing.B) {
			var wg sync.WaitGroup
			for b.Loop() {
				wg.Go(func() { tt.hash(payload) })
				wg.Wait()
			}
		})
	}
}
