package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// Response types shared with the codec.
type (
	// ContextHead is the head of a context (CTX_CREATE, CTX_FORK, GET_HEAD).
	ContextHead = cxdbcompat.HeadResponse
	// AppendResult is the APPEND_TURN response.
	AppendResult = cxdbcompat.AppendTurnResponse
	// TurnRecord is one turn returned by GetLast and GetBefore.
	TurnRecord = cxdbcompat.TurnRecord
	// Hash is a BLAKE3-256 digest.
	Hash = cxdbcompat.Hash
)

// AppendRequest describes a turn to append.
type AppendRequest struct {
	ContextID uint64
	// ParentTurnID is the parent turn; 0 appends after the context head.
	ParentTurnID uint64
	// TypeID and TypeVersion declare the payload type, e.g.
	// "cxdb.ConversationItem" version 3. TypeID must be UTF-8.
	TypeID      string
	TypeVersion uint32
	// Encoding of Payload; 0 means cxdbcompat.EncodingMsgpack.
	Encoding uint32
	// Compression is sent verbatim while Payload is sent uncompressed,
	// reproducing the official client (which never compresses). Leave it 0
	// unless testing that quirk; use CompressZstd to really compress.
	Compression uint32
	// Payload is the uncompressed turn payload (msgpack). Its BLAKE3 hash
	// and length are sent as content_hash and uncompressed_len.
	Payload []byte
	// IdempotencyKey makes retries safe (empty = none).
	IdempotencyKey string
	// FSRootHash, if set, attaches a filesystem snapshot root to the new
	// turn (frame flags bit 0), like the official AppendTurnWithFs.
	FSRootHash *Hash
	// CompressZstd sends Payload zstd-compressed (compression 1) with the
	// hash and length of the uncompressed bytes.
	CompressZstd bool
}

// CreateContext creates a context whose head is baseTurnID (0 = empty).
func (c *Client) CreateContext(ctx context.Context, baseTurnID uint64) (ContextHead, error) {
	return c.head(ctx, cxdbcompat.CtxCreateRequest{BaseTurnID: baseTurnID})
}

// ForkContext creates a context branching from baseTurnID (0 = empty).
func (c *Client) ForkContext(ctx context.Context, baseTurnID uint64) (ContextHead, error) {
	return c.head(ctx, cxdbcompat.CtxForkRequest{BaseTurnID: baseTurnID})
}

// GetHead returns the head turn and depth of a context.
func (c *Client) GetHead(ctx context.Context, contextID uint64) (ContextHead, error) {
	return c.head(ctx, cxdbcompat.GetHeadRequest{ContextID: contextID})
}

func (c *Client) head(ctx context.Context, req cxdbcompat.Request) (ContextHead, error) {
	payload, err := c.call(ctx, req)
	if err != nil {
		return ContextHead{}, err
	}
	h, err := cxdbcompat.DecodeHeadResponse(payload)
	if err != nil {
		return ContextHead{}, fmt.Errorf("cxdb client: decode %s response: %w", req.MsgType(), err)
	}
	return h, nil
}

// AppendTurn appends a turn and returns its id, depth and content hash.
func (c *Client) AppendTurn(ctx context.Context, req *AppendRequest) (AppendResult, error) {
	wire, err := req.wire()
	if err != nil {
		return AppendResult{}, fmt.Errorf("cxdb client: APPEND_TURN: %w", err)
	}
	payload, err := c.call(ctx, wire)
	if err != nil {
		return AppendResult{}, err
	}
	res, err := cxdbcompat.DecodeAppendTurnResponse(payload)
	if err != nil {
		return AppendResult{}, fmt.Errorf("cxdb client: decode APPEND_TURN response: %w", err)
	}
	return res, nil
}

// wire builds the APPEND_TURN request the official client would send.
func (r *AppendRequest) wire() (cxdbcompat.AppendTurnRequest, error) {
	if r == nil {
		return cxdbcompat.AppendTurnRequest{}, errors.New("nil AppendRequest")
	}
	if !utf8.ValidString(r.TypeID) {
		return cxdbcompat.AppendTurnRequest{}, errors.New("type id is not valid UTF-8")
	}
	if len(r.Payload) > cxdbcompat.MaxPayload {
		return cxdbcompat.AppendTurnRequest{}, fmt.Errorf("payload of %d bytes exceeds %d", len(r.Payload), cxdbcompat.MaxPayload)
	}
	w := cxdbcompat.AppendTurnRequest{
		ContextID:           r.ContextID,
		ParentTurnID:        r.ParentTurnID,
		DeclaredTypeID:      r.TypeID,
		DeclaredTypeVersion: r.TypeVersion,
		Encoding:            r.Encoding,
		Compression:         r.Compression,
		UncompressedLen:     uint32(len(r.Payload)),
		ContentHash:         blake3.Sum256(r.Payload),
		Payload:             r.Payload,
		IdempotencyKey:      []byte(r.IdempotencyKey),
	}
	if w.Encoding == 0 {
		w.Encoding = cxdbcompat.EncodingMsgpack
	}
	if r.FSRootHash != nil {
		w.HasFSRoot, w.FSRootHash = true, *r.FSRootHash
	}
	if r.CompressZstd {
		enc, err := zstdEncoder()
		if err != nil {
			return cxdbcompat.AppendTurnRequest{}, fmt.Errorf("zstd: %w", err)
		}
		w.Compression, w.Payload = cxdbcompat.CompressionZstd, enc.EncodeAll(r.Payload, nil)
	}
	return w, nil
}

// zstdEncoder is shared by all clients; EncodeAll is safe for concurrent
// use and starts no goroutines.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
})

// GetLast returns up to limit turns ending at the context head, oldest
// first. A zero limit means DefaultLimit (10), as in the official client.
// Without includePayload the records carry no payload bytes.
func (c *Client) GetLast(ctx context.Context, contextID uint64, limit uint32, includePayload bool) ([]TurnRecord, error) {
	return c.turns(ctx, cxdbcompat.GetLastRequest{
		ContextID: contextID, Limit: orDefault(limit), IncludePayload: includePayload,
	})
}

// GetBefore returns up to limit turns older than beforeTurnID in the
// context, oldest first (cardbox extension, msg 7). A zero limit means
// DefaultLimit.
func (c *Client) GetBefore(ctx context.Context, contextID, beforeTurnID uint64, limit uint32, includePayload bool) ([]TurnRecord, error) {
	return c.turns(ctx, cxdbcompat.GetBeforeRequest{
		ContextID: contextID, BeforeTurnID: beforeTurnID, Limit: orDefault(limit), IncludePayload: includePayload,
	})
}

func orDefault(limit uint32) uint32 {
	if limit == 0 {
		return DefaultLimit
	}
	return limit
}

func (c *Client) turns(ctx context.Context, req cxdbcompat.Request) ([]TurnRecord, error) {
	payload, err := c.call(ctx, req)
	if err != nil {
		return nil, err
	}
	turns, err := cxdbcompat.DecodeTurnList(payload)
	if err != nil {
		return nil, fmt.Errorf("cxdb client: decode %s response: %w", req.MsgType(), err)
	}
	return turns, nil
}

// GetBlob returns the uncompressed bytes of the blob with the given hash.
func (c *Client) GetBlob(ctx context.Context, hash Hash) ([]byte, error) {
	payload, err := c.call(ctx, cxdbcompat.GetBlobRequest{Hash: hash})
	if err != nil {
		return nil, err
	}
	resp, err := cxdbcompat.DecodeGetBlobResponse(payload)
	if err != nil {
		return nil, fmt.Errorf("cxdb client: decode GET_BLOB response: %w", err)
	}
	return resp.Data, nil
}

// PutBlob stores data under its BLAKE3 hash and reports whether the server
// did not have it before.
func (c *Client) PutBlob(ctx context.Context, data []byte) (hash Hash, wasNew bool, err error) {
	hash = blake3.Sum256(data)
	payload, err := c.call(ctx, cxdbcompat.PutBlobRequest{Hash: hash, Data: data})
	if err != nil {
		return hash, false, err
	}
	resp, err := cxdbcompat.DecodePutBlobResponse(payload)
	if err != nil {
		return hash, false, fmt.Errorf("cxdb client: decode PUT_BLOB response: %w", err)
	}
	return resp.Hash, resp.WasNew, nil
}

// AttachFS attaches the filesystem snapshot rooted at fsRootHash (a tree
// blob already uploaded with PutBlob) to a turn.
func (c *Client) AttachFS(ctx context.Context, turnID uint64, fsRootHash Hash) (cxdbcompat.AttachFSResponse, error) {
	payload, err := c.call(ctx, cxdbcompat.AttachFSRequest{TurnID: turnID, FSRootHash: fsRootHash})
	if err != nil {
		return cxdbcompat.AttachFSResponse{}, err
	}
	resp, err := cxdbcompat.DecodeAttachFSResponse(payload)
	if err != nil {
		return cxdbcompat.AttachFSResponse{}, fmt.Errorf("cxdb client: decode ATTACH_FS response: %w", err)
	}
	return resp, nil
}
