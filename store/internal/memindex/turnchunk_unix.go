//go:build unix

package memindex

import (
	"syscall"
	"unsafe"
)

// turnChunkBytes is the size of one turn chunk.
const turnChunkBytes = int(unsafe.Sizeof([chunkSize]TurnMeta{}))

// mapTurnChunk returns a zeroed turn chunk mapped outside the Go heap, and
// the mapping to release with unmapTurnChunk; ok is false if mapping
// failed.
//
// The turn table is the largest thing the process keeps (72 MB per
// million turns), lives as long as the engine and holds no pointers, so
// the GC gains nothing from managing it. On the heap it still counts
// towards the GC's goal, which lets the heap grow by as much again in
// garbage before a collection (GOGC=100): keeping it outside saves that
// much resident memory. Untouched pages of a mapping cost nothing.
func mapTurnChunk() (_ *[chunkSize]TurnMeta, mapping []byte, ok bool) {
	b, err := syscall.Mmap(-1, 0, turnChunkBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, false
	}
	return (*[chunkSize]TurnMeta)(unsafe.Pointer(unsafe.SliceData(b))), b, true
}

// unmapTurnChunk releases a mapping of mapTurnChunk.
func unmapTurnChunk(mapping []byte) { _ = syscall.Munmap(mapping) }
