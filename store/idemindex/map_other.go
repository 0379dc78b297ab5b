//go:build !unix

package idemindex

// mapTable is not available here: idempotency tables live on the Go
// heap.
func mapTable(slots, positions int) (ring []ringSlot, index []uint32, mapping []byte, ok bool) {
	return nil, nil, nil, false
}

func unmapTable([]byte) {}
