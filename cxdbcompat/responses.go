package cxdbcompat

// Fixed response sizes in bytes.
const (
	helloResponseSize    = 10
	headResponseSize     = 20
	appendResponseSize   = 52
	attachFSResponseSize = 40
	putBlobResponseSize  = 33
)

// HelloResponse is the HELLO response: session_id:u64 |
// protocol_version:u16, and cardbox's capabilities:u64 when not 0.
type HelloResponse struct {
	SessionID       uint64
	ProtocolVersion uint16
	// Capabilities are cardbox's Cap* bits, sent only to a client whose
	// HELLO metadata asked for them; 0 leaves the answer the reference's
	// 10 bytes. The official clients read only the session id.
	Capabilities uint64
}

// AppendTo appends the 10-byte payload, 18 with capabilities.
func (r HelloResponse) AppendTo(dst []byte) []byte {
	dst = appendU64(dst, r.SessionID)
	dst = appendU16(dst, r.ProtocolVersion)
	if r.Capabilities != 0 {
		dst = appendU64(dst, r.Capabilities)
	}
	return dst
}

// DecodeHelloResponse decodes a HELLO response. Like the official clients
// it requires only the session id (8 bytes); ProtocolVersion is 0 when the
// payload is shorter than 10 bytes, Capabilities when shorter than 18.
func DecodeHelloResponse(p []byte) (HelloResponse, error) {
	d := newDecoder("hello response", p)
	r := HelloResponse{SessionID: d.u64("session_id")}
	if d.err != nil {
		return HelloResponse{}, d.err
	}
	if len(p) >= helloResponseSize {
		r.ProtocolVersion = d.u16("protocol_version")
	}
	if len(p) >= helloResponseSize+8 {
		r.Capabilities = d.u64("capabilities")
	}
	return r, nil
}

// HeadResponse is the response of CTX_CREATE, CTX_FORK and GET_HEAD:
// context_id:u64 | head_turn_id:u64 | head_depth:u32.
type HeadResponse struct {
	ContextID  uint64
	HeadTurnID uint64
	HeadDepth  uint32
}

// AppendTo appends the 20-byte payload.
func (r HeadResponse) AppendTo(dst []byte) []byte {
	dst = appendU64(dst, r.ContextID)
	dst = appendU64(dst, r.HeadTurnID)
	return appendU32(dst, r.HeadDepth)
}

// DecodeHeadResponse decodes a CTX_CREATE / CTX_FORK / GET_HEAD response.
func DecodeHeadResponse(p []byte) (HeadResponse, error) {
	d := newDecoder("head response", p)
	r := HeadResponse{
		ContextID:  d.u64("context_id"),
		HeadTurnID: d.u64("head_turn_id"),
		HeadDepth:  d.u32("head_depth"),
	}
	if d.err != nil {
		return HeadResponse{}, d.err
	}
	return r, nil
}

// AppendTurnResponse is the APPEND_TURN response:
// context_id:u64 | new_turn_id:u64 | new_depth:u32 | content_hash:H32,
// and cardbox's parent_turn_id:u64 when HasParent.
type AppendTurnResponse struct {
	ContextID   uint64
	NewTurnID   uint64
	NewDepth    uint32
	ContentHash Hash
	// ParentTurnID is the new turn's parent, sent (HasParent) only to a
	// session that asked for capabilities (CapAppendParent): the official
	// clients get the reference's 52 bytes.
	ParentTurnID uint64
	HasParent    bool
}

// AppendTo appends the 52-byte payload, 60 with the parent.
func (r AppendTurnResponse) AppendTo(dst []byte) []byte {
	dst = appendU64(dst, r.ContextID)
	dst = appendU64(dst, r.NewTurnID)
	dst = appendU32(dst, r.NewDepth)
	dst = append(dst, r.ContentHash[:]...)
	if r.HasParent {
		dst = appendU64(dst, r.ParentTurnID)
	}
	return dst
}

// DecodeAppendTurnResponse decodes an APPEND_TURN response.
func DecodeAppendTurnResponse(p []byte) (AppendTurnResponse, error) {
	d := newDecoder("append_turn response", p)
	r := AppendTurnResponse{
		ContextID:   d.u64("context_id"),
		NewTurnID:   d.u64("new_turn_id"),
		NewDepth:    d.u32("new_depth"),
		ContentHash: d.hash("content_hash"),
	}
	if d.err != nil {
		return AppendTurnResponse{}, d.err
	}
	if len(p) >= appendResponseSize+8 {
		r.ParentTurnID, r.HasParent = d.u64("parent_turn_id"), true
	}
	return r, nil
}

// GetBlobResponse is the GET_BLOB response: data:bin32 (uncompressed).
// Data aliases the decoded payload.
type GetBlobResponse struct {
	Data []byte
}

// AppendTo appends the payload.
func (r GetBlobResponse) AppendTo(dst []byte) []byte { return appendBin32(dst, r.Data) }

// DecodeGetBlobResponse decodes a GET_BLOB response.
func DecodeGetBlobResponse(p []byte) (GetBlobResponse, error) {
	d := newDecoder("get_blob response", p)
	r := GetBlobResponse{Data: d.bin32("data")}
	if d.err != nil {
		return GetBlobResponse{}, d.err
	}
	return r, nil
}

// AttachFSResponse is the ATTACH_FS response, an echo of the request:
// turn_id:u64 | fs_root_hash:H32.
type AttachFSResponse struct {
	TurnID     uint64
	FSRootHash Hash
}

// AppendTo appends the 40-byte payload.
func (r AttachFSResponse) AppendTo(dst []byte) []byte {
	dst = appendU64(dst, r.TurnID)
	return append(dst, r.FSRootHash[:]...)
}

// DecodeAttachFSResponse decodes an ATTACH_FS response.
func DecodeAttachFSResponse(p []byte) (AttachFSResponse, error) {
	d := newDecoder("attach_fs response", p)
	r := AttachFSResponse{TurnID: d.u64("turn_id"), FSRootHash: d.hash("fs_root_hash")}
	if d.err != nil {
		return AttachFSResponse{}, d.err
	}
	return r, nil
}

// PutBlobResponse is the PUT_BLOB response: hash:H32 | was_new:u8.
type PutBlobResponse struct {
	Hash Hash
	// WasNew is true when the blob was newly stored (byte 1).
	WasNew bool
}

// AppendTo appends the 33-byte payload.
func (r PutBlobResponse) AppendTo(dst []byte) []byte {
	dst = append(dst, r.Hash[:]...)
	if r.WasNew {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// DecodePutBlobResponse decodes a PUT_BLOB response; WasNew is true only
// for the byte value 1, as in the official client.
func DecodePutBlobResponse(p []byte) (PutBlobResponse, error) {
	d := newDecoder("put_blob response", p)
	r := PutBlobResponse{Hash: d.hash("hash"), WasNew: d.u8("was_new") == 1}
	if d.err != nil {
		return PutBlobResponse{}, d.err
	}
	return r, nil
}
