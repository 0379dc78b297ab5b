//go:build !unix

package store

// mapIdemTable is not available here: idempotency tables live on the Go
// heap.
func mapIdemTable(slots, positions int) (ring []idemSlot, index []uint32, mapping []byte, ok bool) {
	return nil, nil, nil, false
}

func unmapIdemTable([]byte) {}
