//go:build !unix

package memindex

// mapTurnChunk is not available here: turn chunks live on the Go heap.
func mapTurnChunk() (_ *[chunkSize]TurnMeta, mapping []byte, ok bool) { return nil, nil, false }

func unmapTurnChunk([]byte) {}
