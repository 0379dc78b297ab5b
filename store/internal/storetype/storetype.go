// Package storetype holds the value types of the turn store's API that the
// engine (package store) and its internal packages share: the append
// request and its answer, a committed turn's notice, a context's head.
// Package store re-exports each under the same name; callers use those.
package storetype

import (
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// ErrClosed is returned by calls made after the store was closed.
var ErrClosed = fault.New(fault.Unavailable, "store is shutting down")

// Head is a context's current head turn (0 for an empty context).
type Head struct {
	ContextID uint64
	TurnID    uint64
	Depth     uint32
}

// ContextInfo is a context's head and its times.
type ContextInfo struct {
	Head
	CreatedAt time.Time
	UpdatedAt time.Time // the last append (the creation, before one)
}

// AppendRequest is one turn to append. Payload is the bytes as sent:
// compressed when Compression is 1 (zstd).
type AppendRequest struct {
	ContextID       uint64
	ParentTurnID    uint64 // 0 = the context's current head
	TypeID          string
	TypeVersion     uint32
	Encoding        uint32
	Compression     uint32
	UncompressedLen uint32
	ContentHash     ident.Hash // BLAKE3-256 of the uncompressed payload
	Payload         []byte
	IdempotencyKey  []byte
	FSRoot          *ident.Hash // attach this fs tree to the new turn
	// IfHead makes the append conditional: it commits only while
	// ParentTurnID is the context's head (0: while the context is empty),
	// else it fails with fault.HeadMoved naming the head. A repeat of a
	// committed idempotency key is answered before the head is checked.
	IfHead bool
}

// AppendResult describes the appended turn, or the original one when the
// idempotency key was seen before (Replayed).
type AppendResult struct {
	ContextID   uint64
	TurnID      uint64
	ParentID    uint64 // the turn's parent; 0 for the first of a chain
	Depth       uint32
	ContentHash ident.Hash
	Replayed    bool
}

// Appended is a committed turn, as the store's OnAppend listener is told
// of it.
type Appended struct {
	Tenant      ident.Tenant
	ContextID   uint64
	TurnID      uint64
	ParentID    uint64
	Depth       uint32
	TypeID      string
	TypeVersion uint32
	// UncompressedLen, CreatedAt and Keyed (appended with an idempotency
	// key) are as its turns row has them.
	UncompressedLen uint32
	CreatedAt       time.Time
	Keyed           bool
	// Payload is the turn's uncompressed payload when it is at most the
	// store's OnAppendPayloads bytes, nil otherwise: a copy the listener
	// may keep.
	Payload []byte
}
