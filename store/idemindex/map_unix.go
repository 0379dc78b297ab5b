//go:build unix

package idemindex

import (
	"syscall"
	"unsafe"
)

// mapTable returns the zeroed ring and index of an idempotency table
// (see Table) in one mapping outside the Go heap, and the mapping to
// release with unmapTable; ok is false if mapping failed.
//
// As with the turn table (see mapTurnChunk): the table lives as long as
// the engine and holds no pointers, so the GC gains nothing from managing
// it, and on the heap it would count towards the GC's goal, which lets as
// much again of garbage gather before a collection. Pages of the mapping
// that no key has touched cost nothing.
func mapTable(slots, positions int) (ring []ringSlot, index []uint32, mapping []byte, ok bool) {
	ringBytes := slots * int(unsafe.Sizeof(ringSlot{}))
	b, err := syscall.Mmap(-1, 0, ringBytes+positions*4, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, nil, false
	}
	ring = unsafe.Slice((*ringSlot)(unsafe.Pointer(unsafe.SliceData(b))), slots)
	index = unsafe.Slice((*uint32)(unsafe.Pointer(&b[ringBytes])), positions)
	return ring, index, b, true
}

// unmapTable releases a mapping of mapTable.
func unmapTable(mapping []byte) { _ = syscall.Munmap(mapping) }
