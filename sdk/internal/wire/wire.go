// Package wire encodes and decodes the frames of the CXDB binary protocol
// as cardbox serves it: a 16-byte little-endian header (len u32, msg_type
// u16, flags u16, req_id u64) and a payload of at most MaxPayload bytes.
// Decoders never trust a length from the network: they check it against
// the bytes at hand before allocating.
package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Message types.
const (
	MsgHello     uint16 = 1
	MsgCtxCreate uint16 = 2
	MsgCtxFork   uint16 = 3
	MsgGetHead   uint16 = 4
	MsgAppend    uint16 = 5
	MsgGetLast   uint16 = 6
	MsgGetBefore uint16 = 7
	MsgGetBlob   uint16 = 9
	MsgAttachFS  uint16 = 10
	MsgPutBlob   uint16 = 11
	MsgError     uint16 = 255
)

// Flags of APPEND_TURN.
const (
	// FlagFSRoot says an fs root hash ends the payload.
	FlagFSRoot uint16 = 1
	// FlagIfHead makes the append conditional on its parent being the
	// context's head (cardbox; only for servers announcing it).
	FlagIfHead uint16 = 1 << 1
)

const (
	// HeaderSize is the size of a frame header.
	HeaderSize = 16
	// MaxPayload is the largest payload a frame may carry (64 MiB).
	MaxPayload = 64 << 20
	// HashSize is the size of a BLAKE3-256 digest.
	HashSize = 32
	// ProtocolVersion is the version HELLO announces.
	ProtocolVersion = 1
	// EncodingMsgpack is the only payload encoding.
	EncodingMsgpack = 1
	// CompressionZstd marks a zstd-compressed append payload.
	CompressionZstd = 1
)

var le = binary.LittleEndian

// ErrTruncated reports a payload shorter than its layout.
var ErrTruncated = errors.New("truncated payload")

// ErrFrameTooLarge reports a frame header announcing more than MaxPayload.
var ErrFrameTooLarge = errors.New("frame larger than 64 MiB")

// Hash is a BLAKE3-256 digest.
type Hash [HashSize]byte

// Frame is one decoded frame.
type Frame struct {
	Type    uint16
	Flags   uint16
	ReqID   uint64
	Payload []byte
}

// AppendFrame appends a frame with the given payload to dst.
func AppendFrame(dst []byte, typ, flags uint16, reqID uint64, payload []byte) ([]byte, error) {
	if len(payload) > MaxPayload {
		return dst, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, len(payload))
	}
	dst = le.AppendUint32(dst, uint32(len(payload)))
	dst = le.AppendUint16(dst, typ)
	dst = le.AppendUint16(dst, flags)
	dst = le.AppendUint64(dst, reqID)
	return append(dst, payload...), nil
}

// ReadFrame reads one frame. A header announcing more than MaxPayload is
// refused before its payload is read; the stream is then unusable.
func ReadFrame(r io.Reader) (Frame, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	n := le.Uint32(h[0:])
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: header says %d bytes", ErrFrameTooLarge, n)
	}
	f := Frame{Type: le.Uint16(h[4:]), Flags: le.Uint16(h[6:]), ReqID: le.Uint64(h[8:])}
	// A large announced length is read as it arrives, so a lying header
	// costs no more memory than the bytes really sent.
	var err error
	if n <= 1<<20 {
		f.Payload = make([]byte, n)
		_, err = io.ReadFull(r, f.Payload)
	} else {
		f.Payload, err = io.ReadAll(io.LimitReader(r, int64(n)))
		if err == nil && uint32(len(f.Payload)) < n {
			err = io.ErrUnexpectedEOF
		}
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return Frame{}, err
	}
	return f, nil
}

// Hello is a HELLO request: version 1, the client tag and the client
// metadata JSON (where cardbox reads {"api_key": ...}).
func Hello(tag string, meta []byte) []byte {
	p := le.AppendUint16(nil, ProtocolVersion)
	p = le.AppendUint16(p, uint16(len(tag)))
	p = append(p, tag...)
	p = le.AppendUint32(p, uint32(len(meta)))
	return append(p, meta...)
}

// U64 is the payload of CTX_CREATE, CTX_FORK and GET_HEAD.
func U64(v uint64) []byte { return le.AppendUint64(nil, v) }

// Append is an APPEND_TURN request. Payload is the bytes as sent (zstd
// when Compression is CompressionZstd); ContentHash and UncompressedLen
// describe the uncompressed bytes.
type Append struct {
	ContextID, ParentTurnID uint64
	TypeID                  string
	TypeVersion             uint32
	Compression             uint32
	UncompressedLen         uint32
	ContentHash             Hash
	Payload                 []byte
	IdempotencyKey          string
	FSRoot                  *Hash
	IfHead                  bool
}

// Encode returns the request's payload and frame flags.
func (a Append) Encode() ([]byte, uint16) {
	p := make([]byte, 0, 96+len(a.TypeID)+len(a.Payload)+len(a.IdempotencyKey))
	p = le.AppendUint64(p, a.ContextID)
	p = le.AppendUint64(p, a.ParentTurnID)
	p = le.AppendUint32(p, uint32(len(a.TypeID)))
	p = append(p, a.TypeID...)
	p = le.AppendUint32(p, a.TypeVersion)
	p = le.AppendUint32(p, EncodingMsgpack)
	p = le.AppendUint32(p, a.Compression)
	p = le.AppendUint32(p, a.UncompressedLen)
	p = append(p, a.ContentHash[:]...)
	p = le.AppendUint32(p, uint32(len(a.Payload)))
	p = append(p, a.Payload...)
	p = le.AppendUint32(p, uint32(len(a.IdempotencyKey)))
	p = append(p, a.IdempotencyKey...)
	var flags uint16
	if a.IfHead {
		flags |= FlagIfHead
	}
	if a.FSRoot == nil {
		return p, flags
	}
	return append(p, a.FSRoot[:]...), flags | FlagFSRoot
}

// Turns is a GET_LAST request (or GET_BEFORE when Before is not 0).
type Turns struct {
	ContextID, Before uint64
	Limit             uint32
	IncludePayload    bool
}

// Encode returns the request's message type and payload.
func (t Turns) Encode() (uint16, []byte) {
	include := uint32(0)
	if t.IncludePayload {
		include = 1
	}
	p := le.AppendUint64(nil, t.ContextID)
	typ := MsgGetLast
	if t.Before != 0 {
		typ = MsgGetBefore
		p = le.AppendUint64(p, t.Before)
	}
	p = le.AppendUint32(p, t.Limit)
	return typ, le.AppendUint32(p, include)
}

// PutBlob is a PUT_BLOB request payload.
func PutBlob(h Hash, data []byte) []byte {
	p := make([]byte, 0, HashSize+4+len(data))
	p = append(p, h[:]...)
	p = le.AppendUint32(p, uint32(len(data)))
	return append(p, data...)
}

// AttachFS is an ATTACH_FS request payload.
func AttachFS(turnID uint64, root Hash) []byte {
	return append(le.AppendUint64(nil, turnID), root[:]...)
}

// decoder reads a payload front to back; the first short read sets err
// and every later read returns zero values.
type decoder struct {
	p   []byte
	err error
}

func (d *decoder) take(n uint64, what string) []byte {
	if d.err != nil {
		return nil
	}
	if uint64(len(d.p)) < n {
		d.err = fmt.Errorf("%w: %s", ErrTruncated, what)
		return nil
	}
	b := d.p[:n]
	d.p = d.p[n:]
	return b
}

func (d *decoder) u32(what string) uint32 {
	if b := d.take(4, what); b != nil {
		return le.Uint32(b)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if b := d.take(8, what); b != nil {
		return le.Uint64(b)
	}
	return 0
}

func (d *decoder) hash(what string) (h Hash) {
	copy(h[:], d.take(HashSize, what))
	return h
}

func (d *decoder) bin32(what string) []byte {
	n := d.u32(what + " length")
	return d.take(uint64(n), what)
}

// Head is the answer to CTX_CREATE, CTX_FORK and GET_HEAD.
type Head struct {
	ContextID, HeadTurnID uint64
	HeadDepth             uint32
}

// DecodeHead decodes a 20-byte head answer.
func DecodeHead(p []byte) (Head, error) {
	d := decoder{p: p}
	h := Head{ContextID: d.u64("context_id"), HeadTurnID: d.u64("head_turn_id"), HeadDepth: d.u32("head_depth")}
	return h, d.err
}

// Appended is the answer to APPEND_TURN.
type Appended struct {
	ContextID, TurnID uint64
	Depth             uint32
	ContentHash       Hash
	// ParentTurnID is set (HasParent) by a cardbox server that announced
	// it in HELLO: 8 bytes after the reference's 52.
	ParentTurnID uint64
	HasParent    bool
}

// DecodeAppended decodes an APPEND_TURN answer: 52 bytes, or 60 with the
// parent.
func DecodeAppended(p []byte) (Appended, error) {
	d := decoder{p: p}
	a := Appended{ContextID: d.u64("context_id"), TurnID: d.u64("turn_id"), Depth: d.u32("depth"), ContentHash: d.hash("content_hash")}
	if d.err == nil && len(d.p) >= 8 {
		a.ParentTurnID, a.HasParent = d.u64("parent_turn_id"), true
	}
	return a, d.err
}

// Turn is one record of a GET_LAST or GET_BEFORE answer.
type Turn struct {
	TurnID, ParentTurnID uint64
	Depth                uint32
	TypeID               string
	TypeVersion          uint32
	Encoding             uint32
	Compression          uint32
	UncompressedLen      uint32
	ContentHash          Hash
	Payload              []byte
}

// minTurnSize is the smallest encoded record: ids, depth, an empty type
// id, four u32 fields, the hash and a zero payload length.
const minTurnSize = 8 + 8 + 4 + 4 + 16 + HashSize + 4

// DecodeTurns decodes a GET_LAST / GET_BEFORE answer (oldest first). The
// count is checked against the bytes present; trailing bytes (cardbox's
// padding byte) are ignored. Payloads alias p.
func DecodeTurns(p []byte) ([]Turn, error) {
	d := decoder{p: p}
	n := d.u32("count")
	if d.err != nil {
		return nil, d.err
	}
	if uint64(n) > uint64(len(d.p))/minTurnSize {
		return nil, fmt.Errorf("%w: %d turns announced in %d bytes", ErrTruncated, n, len(d.p))
	}
	turns := make([]Turn, 0, n)
	for range n {
		t := Turn{
			TurnID:       d.u64("turn_id"),
			ParentTurnID: d.u64("parent_turn_id"),
			Depth:        d.u32("depth"),
			TypeID:       string(d.bin32("type_id")),
			TypeVersion:  d.u32("type_version"),
			Encoding:     d.u32("encoding"),
			Compression:  d.u32("compression"),
		}
		t.UncompressedLen = d.u32("uncompressed_len")
		t.ContentHash = d.hash("content_hash")
		t.Payload = d.bin32("payload")
		if d.err != nil {
			return nil, d.err
		}
		turns = append(turns, t)
	}
	return turns, nil
}

// DecodeBlob decodes a GET_BLOB answer (data:bin32).
func DecodeBlob(p []byte) ([]byte, error) {
	d := decoder{p: p}
	b := d.bin32("data")
	return b, d.err
}

// DecodePutBlob decodes a PUT_BLOB answer: the hash and whether the blob
// was new.
func DecodePutBlob(p []byte) (Hash, bool, error) {
	d := decoder{p: p}
	h := d.hash("hash")
	b := d.take(1, "was_new")
	if d.err != nil {
		return Hash{}, false, d.err
	}
	return h, b[0] == 1, nil
}

// DecodeHello decodes a HELLO answer: the session id, and whatever
// follows the 10 bytes of protocol version 1 (where a later server may
// announce capabilities).
func DecodeHello(p []byte) (session uint64, extra []byte, err error) {
	d := decoder{p: p}
	session = d.u64("session_id")
	d.take(2, "protocol_version")
	return session, d.p, d.err
}

// Error is a decoded ERROR frame.
type Error struct {
	Code    uint32
	Kind    string
	Message string
	Details map[string]any
}

// DecodeError decodes an ERROR payload (code u32, detail str32). cardbox
// sends a JSON detail {"code","message","details"}; a plain-text detail
// becomes the message. It never fails: a damaged frame still says what
// it can.
func DecodeError(p []byte) Error {
	d := decoder{p: p}
	e := Error{Code: d.u32("code")}
	detail := d.bin32("detail")
	if d.err != nil {
		e.Message = "undecodable error frame"
		return e
	}
	var v struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Details json.RawMessage `json:"details"`
	}
	if json.Unmarshal(detail, &v) == nil && (v.Code != "" || v.Message != "") {
		e.Kind, e.Message = v.Code, v.Message
		_ = json.Unmarshal(v.Details, &e.Details) // not an object: no details
		return e
	}
	e.Message = string(detail)
	return e
}
