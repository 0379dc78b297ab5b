//go:build !unix

package store

// mapTurnChunk is not available here: turn chunks live on the Go heap.
func mapTurnChunk() (_ *[chunkSize]turnMeta, mapping []byte, ok bool) { return nil, nil, false }

func unmapTurnChunk([]byte) {}
