package cxdbcompat

import (
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"
)

// Request is a decoded request payload. Every request type of this package
// implements it; DecodeRequest returns one.
type Request interface {
	// MsgType is the frame msg_type carrying this request.
	MsgType() MsgType
	// Flags is the frame flags value the request needs (0 except for an
	// APPEND_TURN with an fs root).
	Flags() uint16
	// AppendTo appends the request's wire payload to dst.
	AppendTo(dst []byte) []byte
}

// HelloRequest is the HELLO (1) payload:
// protocol_version:u16 | client_tag:str16 | client_meta_json:str32,
// or an empty payload (Legacy).
type HelloRequest struct {
	// Legacy marks the empty-payload form (no version, tag "").
	Legacy bool
	// ProtocolVersion is ignored by servers; clients send ProtocolVersion.
	ProtocolVersion uint16
	// ClientTag names the client; at most 65535 bytes of UTF-8.
	ClientTag string
	// ClientMetaJSON is free-form JSON (may be empty); aliases the payload.
	ClientMetaJSON []byte
}

// MsgType returns MsgHello.
func (HelloRequest) MsgType() MsgType { return MsgHello }

// WantsCapabilities reports whether the client's metadata asks for
// cardbox's capability bits in the answer ({"capabilities": true}): only
// such a client gets more than the reference's 10 bytes.
func (r HelloRequest) WantsCapabilities() bool {
	if len(r.ClientMetaJSON) == 0 {
		return false
	}
	var meta struct {
		Capabilities bool `json:"capabilities"`
	}
	return json.Unmarshal(r.ClientMetaJSON, &meta) == nil && meta.Capabilities
}

// Flags returns 0.
func (HelloRequest) Flags() uint16 { return 0 }

// Validate reports whether r can be encoded faithfully: a tag of at most
// 65535 bytes and UTF-8 tag and metadata.
func (r HelloRequest) Validate() error {
	switch {
	case len(r.ClientTag) > math.MaxUint16:
		return fmt.Errorf("hello: client_tag is %d bytes, max %d", len(r.ClientTag), math.MaxUint16)
	case !utf8.ValidString(r.ClientTag):
		return fmt.Errorf("hello: client_tag not utf8")
	case !utf8.Valid(r.ClientMetaJSON):
		return fmt.Errorf("hello: client_meta_json not utf8")
	}
	return nil
}

// AppendTo appends the payload (nothing for Legacy). See Validate.
func (r HelloRequest) AppendTo(dst []byte) []byte {
	if r.Legacy {
		return dst
	}
	dst = appendU16(dst, r.ProtocolVersion)
	dst = appendStr16(dst, r.ClientTag)
	return appendBin32(dst, r.ClientMetaJSON)
}

// DecodeHelloRequest decodes a HELLO payload. An empty payload is the
// legacy form; otherwise at least 4 bytes are required and the meta length
// is mandatory.
func DecodeHelloRequest(p []byte) (HelloRequest, error) {
	if len(p) == 0 {
		return HelloRequest{Legacy: true}, nil
	}
	if len(p) < 4 {
		return HelloRequest{}, malformed("hello", "client_tag", "hello payload too short")
	}
	d := newDecoder("hello", p)
	r := HelloRequest{
		ProtocolVersion: d.u16("protocol_version"),
		ClientTag:       d.str16("client_tag"),
		ClientMetaJSON:  d.utf8Bytes(d.bin32("client_meta_json"), "client_meta_json"),
	}
	if d.err != nil {
		return HelloRequest{}, d.err
	}
	return r, nil
}

// CtxCreateRequest is the CTX_CREATE (2) payload: base_turn_id:u64.
// BaseTurnID 0 creates an empty context.
type CtxCreateRequest struct {
	BaseTurnID uint64
}

// MsgType returns MsgCtxCreate.
func (CtxCreateRequest) MsgType() MsgType { return MsgCtxCreate }

// Flags returns 0.
func (CtxCreateRequest) Flags() uint16 { return 0 }

// AppendTo appends the 8-byte payload.
func (r CtxCreateRequest) AppendTo(dst []byte) []byte { return appendU64(dst, r.BaseTurnID) }

// DecodeCtxCreateRequest decodes a CTX_CREATE payload.
func DecodeCtxCreateRequest(p []byte) (CtxCreateRequest, error) {
	d := newDecoder("ctx_create", p)
	r := CtxCreateRequest{BaseTurnID: d.u64("base_turn_id")}
	return r, d.err
}

// CtxForkRequest is the CTX_FORK (3) payload: base_turn_id:u64.
type CtxForkRequest struct {
	BaseTurnID uint64
}

// MsgType returns MsgCtxFork.
func (CtxForkRequest) MsgType() MsgType { return MsgCtxFork }

// Flags returns 0.
func (CtxForkRequest) Flags() uint16 { return 0 }

// AppendTo appends the 8-byte payload.
func (r CtxForkRequest) AppendTo(dst []byte) []byte { return appendU64(dst, r.BaseTurnID) }

// DecodeCtxForkRequest decodes a CTX_FORK payload.
func DecodeCtxForkRequest(p []byte) (CtxForkRequest, error) {
	d := newDecoder("ctx_fork", p)
	r := CtxForkRequest{BaseTurnID: d.u64("base_turn_id")}
	return r, d.err
}

// GetHeadRequest is the GET_HEAD (4) payload: context_id:u64.
type GetHeadRequest struct {
	ContextID uint64
}

// MsgType returns MsgGetHead.
func (GetHeadRequest) MsgType() MsgType { return MsgGetHead }

// Flags returns 0.
func (GetHeadRequest) Flags() uint16 { return 0 }

// AppendTo appends the 8-byte payload.
func (r GetHeadRequest) AppendTo(dst []byte) []byte { return appendU64(dst, r.ContextID) }

// DecodeGetHeadRequest decodes a GET_HEAD payload.
func DecodeGetHeadRequest(p []byte) (GetHeadRequest, error) {
	d := newDecoder("get_head", p)
	r := GetHeadRequest{ContextID: d.u64("context_id")}
	return r, d.err
}

// AppendTurnRequest is the APPEND_TURN (5) payload:
//
//	context_id:u64 | parent_turn_id:u64 | declared_type_id:str32
//	| declared_type_version:u32 | encoding:u32 | compression:u32
//	| uncompressed_len:u32 | content_hash:H32 | payload:bin32
//	| idempotency_key:bin32 [| fs_root_hash:H32 if flags bit 0]
//
// Payload and IdempotencyKey alias the decoded frame payload.
type AppendTurnRequest struct {
	ContextID           uint64
	ParentTurnID        uint64
	DeclaredTypeID      string
	DeclaredTypeVersion uint32
	Encoding            uint32
	Compression         uint32
	UncompressedLen     uint32
	// ContentHash is BLAKE3 of the uncompressed payload.
	ContentHash Hash
	// Payload is the (possibly compressed) turn payload as sent.
	Payload        []byte
	IdempotencyKey []byte
	// HasFSRoot says FSRootHash is present (frame flags bit 0).
	HasFSRoot  bool
	FSRootHash Hash
	// IfHead makes the append conditional on ParentTurnID being the
	// context's head (frame flags bit 1, FlagIfHead).
	IfHead bool
}

// MsgType returns MsgAppendTurn.
func (AppendTurnRequest) MsgType() MsgType { return MsgAppendTurn }

// Flags returns FlagFSRoot when HasFSRoot is set and FlagIfHead when
// IfHead is.
func (r AppendTurnRequest) Flags() uint16 {
	var flags uint16
	if r.HasFSRoot {
		flags |= FlagFSRoot
	}
	if r.IfHead {
		flags |= FlagIfHead
	}
	return flags
}

// AppendTo appends the payload; FSRootHash is written only if HasFSRoot.
func (r AppendTurnRequest) AppendTo(dst []byte) []byte {
	dst = appendU64(dst, r.ContextID)
	dst = appendU64(dst, r.ParentTurnID)
	dst = appendStr32(dst, r.DeclaredTypeID)
	dst = appendU32(dst, r.DeclaredTypeVersion)
	dst = appendU32(dst, r.Encoding)
	dst = appendU32(dst, r.Compression)
	dst = appendU32(dst, r.UncompressedLen)
	dst = append(dst, r.ContentHash[:]...)
	dst = appendBin32(dst, r.Payload)
	dst = appendBin32(dst, r.IdempotencyKey)
	if r.HasFSRoot {
		dst = append(dst, r.FSRootHash[:]...)
	}
	return dst
}

// AppendTurnSize reads an APPEND_TURN payload's compression and declared
// uncompressed length without decoding the rest: what a server charges
// for before it decompresses. ok is false when p is too short to hold
// them (DecodeAppendTurnRequest then says why).
func AppendTurnSize(p []byte) (compression, uncompressedLen uint32, ok bool) {
	const typeIDLenAt = 16 // after context_id and parent_turn_id
	if len(p) < typeIDLenAt+4 {
		return 0, 0, false
	}
	// declared_type_version and encoding lie between the type id and
	// compression.
	at := uint64(typeIDLenAt+4) + uint64(le.Uint32(p[typeIDLenAt:])) + 8
	if uint64(len(p)) < at+8 {
		return 0, 0, false
	}
	return le.Uint32(p[at:]), le.Uint32(p[at+4:]), true
}

// DecodeAppendTurnRequest decodes an APPEND_TURN payload; flags bit 0 says
// an fs_root_hash follows, bit 1 that the append is conditional (no
// bytes). Other bits and trailing bytes are ignored.
func DecodeAppendTurnRequest(flags uint16, p []byte) (AppendTurnRequest, error) {
	d := newDecoder("append_turn", p)
	r := AppendTurnRequest{
		ContextID:           d.u64("context_id"),
		ParentTurnID:        d.u64("parent_turn_id"),
		DeclaredTypeID:      d.str32("declared_type_id"),
		DeclaredTypeVersion: d.u32("declared_type_version"),
		Encoding:            d.u32("encoding"),
		Compression:         d.u32("compression"),
		UncompressedLen:     d.u32("uncompressed_len"),
		ContentHash:         d.hash("content_hash"),
		Payload:             d.bin32("payload"),
		IdempotencyKey:      d.bin32("idempotency_key"),
		HasFSRoot:           flags&FlagFSRoot != 0,
		IfHead:              flags&FlagIfHead != 0,
	}
	if r.HasFSRoot {
		r.FSRootHash = d.hash("fs_root_hash")
	}
	if d.err != nil {
		return AppendTurnRequest{}, d.err
	}
	return r, nil
}

// GetLastRequest is the GET_LAST (6) payload:
// context_id:u64 | limit:u32 | include_payload:u32 (non-zero = true).
type GetLastRequest struct {
	ContextID      uint64
	Limit          uint32
	IncludePayload bool
}

// MsgType returns MsgGetLast.
func (GetLastRequest) MsgType() MsgType { return MsgGetLast }

// Flags returns 0.
func (GetLastRequest) Flags() uint16 { return 0 }

// AppendTo appends the 16-byte payload.
func (r GetLastRequest) AppendTo(dst []byte) []byte {
	dst = appendU64(dst, r.ContextID)
	dst = appendU32(dst, r.Limit)
	return appendU32(dst, boolU32(r.IncludePayload))
}

// DecodeGetLastRequest decodes a GET_LAST payload.
func DecodeGetLastRequest(p []byte) (GetLastRequest, error) {
	d := newDecoder("get_last", p)
	r := GetLastRequest{
		ContextID:      d.u64("context_id"),
		Limit:          d.u32("limit"),
		IncludePayload: d.u32("include_payload") != 0,
	}
	if d.err != nil {
		return GetLastRequest{}, d.err
	}
	return r, nil
}

// GetBeforeRequest is the GET_BEFORE (7) payload, a cardbox extension:
// context_id:u64 | before_turn_id:u64 | limit:u32 | include_payload:u32.
// The response uses the GET_LAST turn list encoding.
type GetBeforeRequest struct {
	ContextID      uint64
	BeforeTurnID   uint64
	Limit          uint32
	IncludePayload bool
}

// MsgType returns MsgGetBefore.
func (GetBeforeRequest) MsgType() MsgType { return MsgGetBefore }

// Flags returns 0.
func (GetBeforeRequest) Flags() uint16 { return 0 }

// AppendTo appends the 24-byte payload.
func (r GetBeforeRequest) AppendTo(dst []byte) []byte {
	dst = appendU64(dst, r.ContextID)
	dst = appendU64(dst, r.BeforeTurnID)
	dst = appendU32(dst, r.Limit)
	return appendU32(dst, boolU32(r.IncludePayload))
}

// DecodeGetBeforeRequest decodes a GET_BEFORE payload.
func DecodeGetBeforeRequest(p []byte) (GetBeforeRequest, error) {
	d := newDecoder("get_before", p)
	r := GetBeforeRequest{
		ContextID:      d.u64("context_id"),
		BeforeTurnID:   d.u64("before_turn_id"),
		Limit:          d.u32("limit"),
		IncludePayload: d.u32("include_payload") != 0,
	}
	if d.err != nil {
		return GetBeforeRequest{}, d.err
	}
	return r, nil
}

// GetBlobRequest is the GET_BLOB (9) payload: exactly hash:H32.
type GetBlobRequest struct {
	Hash Hash
}

// MsgType returns MsgGetBlob.
func (GetBlobRequest) MsgType() MsgType { return MsgGetBlob }

// Flags returns 0.
func (GetBlobRequest) Flags() uint16 { return 0 }

// AppendTo appends the 32-byte payload.
func (r GetBlobRequest) AppendTo(dst []byte) []byte { return append(dst, r.Hash[:]...) }

// DecodeGetBlobRequest decodes a GET_BLOB payload, which must be exactly
// 32 bytes.
func DecodeGetBlobRequest(p []byte) (GetBlobRequest, error) {
	if len(p) != HashSize {
		return GetBlobRequest{}, malformed("get_blob", "hash",
			fmt.Sprintf("invalid blob hash length %d (want %d)", len(p), HashSize))
	}
	return GetBlobRequest{Hash: Hash(p)}, nil
}

// AttachFSRequest is the ATTACH_FS (10) payload:
// turn_id:u64 | fs_root_hash:H32.
type AttachFSRequest struct {
	TurnID     uint64
	FSRootHash Hash
}

// MsgType returns MsgAttachFS.
func (AttachFSRequest) MsgType() MsgType { return MsgAttachFS }

// Flags returns 0.
func (AttachFSRequest) Flags() uint16 { return 0 }

// AppendTo appends the 40-byte payload.
func (r AttachFSRequest) AppendTo(dst []byte) []byte {
	dst = appendU64(dst, r.TurnID)
	return append(dst, r.FSRootHash[:]...)
}

// DecodeAttachFSRequest decodes an ATTACH_FS payload (at least 40 bytes).
func DecodeAttachFSRequest(p []byte) (AttachFSRequest, error) {
	d := newDecoder("attach_fs", p)
	r := AttachFSRequest{TurnID: d.u64("turn_id"), FSRootHash: d.hash("fs_root_hash")}
	if d.err != nil {
		return AttachFSRequest{}, d.err
	}
	return r, nil
}

// PutBlobRequest is the PUT_BLOB (11) payload: hash:H32 | data:bin32.
// Data aliases the decoded frame payload.
type PutBlobRequest struct {
	Hash Hash
	Data []byte
}

// MsgType returns MsgPutBlob.
func (PutBlobRequest) MsgType() MsgType { return MsgPutBlob }

// Flags returns 0.
func (PutBlobRequest) Flags() uint16 { return 0 }

// AppendTo appends the payload.
func (r PutBlobRequest) AppendTo(dst []byte) []byte {
	dst = append(dst, r.Hash[:]...)
	return appendBin32(dst, r.Data)
}

// DecodePutBlobRequest decodes a PUT_BLOB payload (at least 36 bytes).
func DecodePutBlobRequest(p []byte) (PutBlobRequest, error) {
	d := newDecoder("put_blob", p)
	r := PutBlobRequest{Hash: d.hash("hash"), Data: d.bin32("data")}
	if d.err != nil {
		return PutBlobRequest{}, d.err
	}
	return r, nil
}
