// Package store is cardbox's turn store: contexts as branch heads into an
// append-only DAG of turns whose payloads live in a content-addressed blob
// pack.
//
// Bytes live in local append-only files (package blobpack for payloads,
// package turnlog for turn records); facts live in Postgres (tables in
// migrations/). A turn exists if and only if its Postgres row is committed.
// Appends are group-committed by one committer goroutine: one write and one
// fsync per file and one Postgres statement for every append queued while
// the previous group was committing. docs/storage.md states the protocol and
// what recovery does with every kind of leftover.
//
// Reads are served from memory (turn metadata and heads) and the blob pack.
package store

import (
	"context"

	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/store/internal/storetype"
)

// The API's value types live in storetype, which the store's internal
// packages share; they are re-exported here under their names.
type (
	// Head is a context's current head turn (0 for an empty context).
	Head = storetype.Head
	// AppendRequest is one turn to append (see storetype.AppendRequest).
	AppendRequest = storetype.AppendRequest
	// AppendResult describes the appended turn, or the original one when
	// the idempotency key was seen before (Replayed).
	AppendResult = storetype.AppendResult
	// Appended is a committed turn, as Options.OnAppend is told of it.
	Appended = storetype.Appended
	// ContextInfo is a context's head and its times.
	ContextInfo = storetype.ContextInfo
)

// Turn is a turn's metadata and, when asked for, its uncompressed payload.
type Turn struct {
	ID              uint64
	ParentID        uint64
	Depth           uint32
	TypeID          string
	TypeVersion     uint32
	Encoding        uint32
	Compression     uint32 // as the writer sent it
	UncompressedLen uint32
	Hash            ident.Hash
	// Payload is nil unless requested. It is read-only: the store may
	// share it with its cache and other readers.
	Payload []byte
	// PayloadDamaged is set by Last and Before, asked for payloads, on a
	// turn whose payload cannot be read (its blob lies in a damaged
	// record of the blob pack): the turn is served without it, Payload
	// empty and UncompressedLen 0, its other fields intact (Hash names
	// the blob), so that one damaged blob does not hide a window.
	PayloadDamaged bool
}

// TurnStore is what the protocol surfaces need from the store. Every call is
// scoped to one tenant: another tenant's contexts, turns and blobs do not
// exist for it.
type TurnStore interface {
	// Tenant resolves a tenant id.
	Tenant(ctx context.Context, id string) (ident.Tenant, error)
	// CreateContext makes a context whose head is baseTurnID (0 = empty).
	// Forking is the same call with an existing turn.
	CreateContext(ctx context.Context, t ident.Tenant, baseTurnID uint64, clientTag string) (Head, error)
	// Head returns a context's head.
	Head(ctx context.Context, t ident.Tenant, contextID uint64) (Head, error)
	// Append appends a turn once it is durable in the files and Postgres.
	Append(ctx context.Context, t ident.Tenant, req *AppendRequest) (AppendResult, error)
	// Last returns up to limit turns ending at the head, oldest first.
	Last(ctx context.Context, t ident.Tenant, contextID uint64, limit uint32, withPayload bool) ([]Turn, error)
	// Before returns up to limit turns older than beforeTurnID, oldest
	// first; beforeTurnID must be on the context's chain (0 = the head's
	// chain from the head, like Last).
	Before(ctx context.Context, t ident.Tenant, contextID, beforeTurnID uint64, limit uint32, withPayload bool) ([]Turn, error)
	// GetBlob returns a blob's uncompressed bytes, read-only (they may be
	// shared like Turn.Payload).
	GetBlob(ctx context.Context, t ident.Tenant, h ident.Hash) ([]byte, error)
	// PutBlob stores data under its hash; wasNew reports whether the tenant
	// did not have it before.
	PutBlob(ctx context.Context, t ident.Tenant, h ident.Hash, data []byte) (wasNew bool, err error)
	// AttachFS records the fs tree root of a turn (the last attach wins).
	AttachFS(ctx context.Context, t ident.Tenant, turnID uint64, root ident.Hash) error
}
