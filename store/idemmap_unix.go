//go:build unix

package store

import (
	"syscall"
	"unsafe"
)

// mapIdemTable returns the zeroed ring and index of an idempotency table
// (see idemTable) in one mapping outside the Go heap, and the mapping to
// release with unmapIdemTable; ok is false if mapping failed.
//
// As with the turn table (see mapTurnChunk): the table lives as long as
// the engine and holds no pointers, so the GC gains nothing from managing
// it, and on the heap it would count towards the GC's goal, which lets as
// much again of garbage gather before a collection. Pages of the mapping
// that no key has touched cost nothing.
func mapIdemTable(slots, positions int) (ring []idemSlot, index []uint32, mapping []byte, ok bool) {
	ringBytes := slots * int(unsafe.Sizeof(idemSlot{}))
	b, err := syscall.Mmap(-1, 0, ringBytes+positions*4, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, nil, false
	}
	ring = unsafe.Slice((*idemSlot)(unsafe.Pointer(unsafe.SliceData(b))), slots)
	index = unsafe.Slice((*uint32)(unsafe.Pointer(&b[ringBytes])), positions)
	return ring, index, b, true
}

// unmapIdemTable releases a mapping of mapIdemTable.
func unmapIdemTable(mapping []byte) { _ = syscall.Munmap(mapping) }
