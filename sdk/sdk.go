// Package sdk is the Go SDK agent runtimes use to keep their history in
// cardbox (or any CXDB-compatible server): contexts, typed turns, blobs
// and filesystem snapshots.
//
// It offers three small contracts, each an interface with two
// implementations, the network Client and the in-memory fake in package
// sdk/fake:
//
//   - Writer: create and fork contexts, append turns, read heads and the
//     newest turns (the CXDB binary protocol);
//   - Reader: page through a context's turns and publish or read type
//     registry bundles (the CXDB HTTP API);
//   - Artifacts: put and get blobs and attach filesystem snapshots.
//
// Ids are opaque strings at this boundary (decimal u64s on the wire).
//
// Every append carries an idempotency key. Keys should be derived from
// the runtime's own correlation fields (AgentKey, AttractorKey, Key), so
// that a retry, in this process or after a restart, returns the turn
// committed the first time instead of writing a second one. The Client
// retries failed requests over fresh connections with backoff, within the
// caller's context deadline.
//
// Persistence has two modes (Config.Mode): Required, where a failed write
// is the caller's error, and Off, where nothing is written, nothing fails
// and reads answer empty.
package sdk

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/zeebo/blake3"
)

// ContextID identifies a context: a branch head into the turn DAG.
type ContextID string

// TurnID identifies a turn.
type TurnID string

// BlobHash is the lowercase hex BLAKE3-256 hash of a blob's bytes.
type BlobHash string

// ContextHead is a context and its head turn. An empty context's head is
// "" at depth 0; the first turn appended to it has depth 1.
type ContextHead struct {
	ContextID  ContextID
	HeadTurnID TurnID
	HeadDepth  uint32
}

// AppendRequest is one turn to append.
type AppendRequest struct {
	ContextID ContextID
	// ParentTurnID is the turn to append after; "" means the context's
	// head at the moment the server commits the turn. The returned
	// StoredTurn says which parent was used.
	ParentTurnID TurnID
	// TypeID and TypeVersion declare the payload's registry type.
	TypeID      string
	TypeVersion uint32
	// Payload is the msgpack-encoded record.
	Payload []byte
	// IdempotencyKey makes the append safe to retry: the server returns
	// the turn first committed under it (for 24 h, per context). Derive it
	// with AgentKey, AttractorKey or Key. Empty: the client makes a random
	// one, which protects its own retries but not a retry by the caller.
	IdempotencyKey string
	// FSRootHash, when set, attaches a snapshot uploaded before (see
	// package sdk/fstree) to the new turn in the same request.
	FSRootHash BlobHash
	// IfHead makes the append conditional: it commits only while
	// ParentTurnID is the context's head ("" = while the context is
	// empty); when another writer moved the head first it fails with
	// ErrHeadMoved, and HeadMovedTo names the head. A retry under the same
	// IdempotencyKey of an append that committed returns its turn. A
	// server that does not announce Capabilities.ConditionalAppend is not
	// sent it: the append fails with ErrUnsupported.
	IfHead bool
}

// StoredTurn is a committed turn.
type StoredTurn struct {
	ContextID    ContextID
	TurnID       TurnID
	ParentTurnID TurnID // "" for the first turn of a chain
	Depth        uint32
	TypeID       string
	TypeVersion  uint32
	ContentHash  BlobHash
	// Payload is nil when the read did not ask for payloads.
	Payload []byte
}

// Writer is the runtime write contract.
type Writer interface {
	// CreateContext makes a context whose head is base ("" = empty).
	CreateContext(ctx context.Context, base TurnID) (ContextHead, error)
	// ForkContext makes a context branching from the turn from.
	ForkContext(ctx context.Context, from TurnID) (ContextHead, error)
	// AppendTurn appends a turn and returns it as committed.
	AppendTurn(ctx context.Context, req AppendRequest) (StoredTurn, error)
	// Head returns a context's head.
	Head(ctx context.Context, id ContextID) (ContextHead, error)
	// Last returns up to limit turns ending at the head, oldest first.
	Last(ctx context.Context, id ContextID, limit int, includePayload bool) ([]StoredTurn, error)
}

// Reader is the projection read contract.
type Reader interface {
	// ListTurns returns up to limit turns of the context's chain older
	// than before ("" = from the head), oldest first, with payloads. The
	// next older page starts before the first turn returned; an empty
	// page is the end. A page may hold fewer than limit turns (pages are
	// bounded in bytes too).
	ListTurns(ctx context.Context, id ContextID, before TurnID, limit int) ([]StoredTurn, error)
	// PublishBundle publishes a registry bundle; publishing the same bytes
	// again succeeds, other bytes under the same id are ErrConflict.
	PublishBundle(ctx context.Context, bundleID string, bundleJSON []byte) error
	// Bundle returns a published bundle's bytes, or ErrNotFound.
	Bundle(ctx context.Context, bundleID string) ([]byte, error)
}

// Artifacts is the artifact and filesystem contract.
type Artifacts interface {
	// PutBlob stores data and returns its hash.
	PutBlob(ctx context.Context, data []byte) (BlobHash, error)
	// GetBlob returns a blob's bytes, or ErrNotFound.
	GetBlob(ctx context.Context, hash BlobHash) ([]byte, error)
	// MissingBlobs returns those of hashes the server does not hold, in
	// the order given.
	MissingBlobs(ctx context.Context, hashes []BlobHash) ([]BlobHash, error)
	// AttachFS attaches a snapshot's root tree to a turn afterwards.
	AttachFS(ctx context.Context, turn TurnID, root BlobHash) error
}

// Store is all three contracts, and Close.
type Store interface {
	Writer
	Reader
	Artifacts
	// Close releases connections; calls after it fail with ErrClosed.
	Close() error
}

// parseID turns an opaque id into the wire's u64; "" is 0.
func parseID(kind, id string) (uint64, error) {
	if id == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(id, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("%w: %s id %q is not one this server issued", ErrInvalid, kind, id)
	}
	return v, nil
}

// formatID turns a wire id into an opaque one; 0 is "".
func formatID(v uint64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatUint(v, 10)
}

// parseHash decodes a BlobHash.
func parseHash(h BlobHash) ([32]byte, error) {
	var out [32]byte
	if len(h) != 64 {
		return out, fmt.Errorf("%w: blob hash %q is not 64 hex digits", ErrInvalid, h)
	}
	if _, err := hex.Decode(out[:], []byte(h)); err != nil {
		return out, fmt.Errorf("%w: blob hash %q: %v", ErrInvalid, h, err)
	}
	return out, nil
}

// HashOf is the BlobHash of data.
func HashOf(data []byte) BlobHash { return hashHex(blake3.Sum256(data)) }

func hashHex(h [32]byte) BlobHash { return BlobHash(hex.EncodeToString(h[:])) }
