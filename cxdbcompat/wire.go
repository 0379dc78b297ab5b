package cxdbcompat

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"unicode/utf8"
)

// HashSize is the size in bytes of a BLAKE3-256 digest on the wire.
const HashSize = 32

// Hash is a BLAKE3-256 digest as carried on the wire (32 raw bytes). A
// [32]byte such as the result of blake3.Sum256 is assignable to it.
type Hash [HashSize]byte

// String returns the lowercase hex form of h.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is all zero bytes.
func (h Hash) IsZero() bool { return h == Hash{} }

// Protocol constants shared by requests and responses.
const (
	// ProtocolVersion is the only protocol version; sent in HELLO.
	ProtocolVersion uint16 = 1
	// EncodingMsgpack is the turn payload encoding all clients use.
	EncodingMsgpack uint32 = 1
	// CompressionNone marks an uncompressed turn payload.
	CompressionNone uint32 = 0
	// CompressionZstd marks a zstd-compressed turn payload.
	CompressionZstd uint32 = 1
	// FlagFSRoot is the APPEND_TURN request flag (bit 0) saying an
	// fs_root_hash follows the idempotency key.
	FlagFSRoot uint16 = 1
	// FlagIfHead is cardbox's APPEND_TURN request flag (bit 1) making the
	// append conditional: it commits only while parent_turn_id is the
	// context's head (0: while the context is empty), else ERROR 409
	// HEAD_MOVED. The official clients never set it; a server that does
	// not announce CapConditionalAppend ignores it and appends anyway.
	FlagIfHead uint16 = 1 << 1
)

// CapConditionalAppend is the capability bit (HelloResponse.Capabilities)
// saying APPEND_TURN honours FlagIfHead. A cardbox HELLO answer carries
// its capabilities when the client's HELLO metadata asks for them
// ({"capabilities": true}).
const CapConditionalAppend uint64 = 1 << 0

// CapAppendParent is the capability bit saying APPEND_TURN answers carry
// the new turn's parent_turn_id:u64 after their 52 bytes, so that a client
// that let the server choose the parent (parent_turn_id 0) learns it
// without another request. Only a session that asked for capabilities gets
// the longer answer.
const CapAppendParent uint64 = 1 << 1

var le = binary.LittleEndian

// decoder is a bounds-checked cursor over a payload with a sticky error:
// after the first failure every read returns a zero value.
type decoder struct {
	op  string
	buf []byte
	off int
	err error
}

func newDecoder(op string, p []byte) decoder { return decoder{op: op, buf: p} }

func (d *decoder) fail(field, reason string) {
	if d.err == nil {
		d.err = malformed(d.op, field, reason)
	}
}

// take returns the next n bytes, capacity-limited so that appending to the
// result cannot overwrite the rest of the payload.
func (d *decoder) take(n uint64, field string) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)-d.off) {
		d.fail(field, "payload truncated reading "+field)
		return nil
	}
	end := d.off + int(n)
	b := d.buf[d.off:end:end]
	d.off = end
	return b
}

func (d *decoder) u8(field string) uint8 {
	if b := d.take(1, field); d.err == nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u16(field string) uint16 {
	if b := d.take(2, field); d.err == nil {
		return le.Uint16(b)
	}
	return 0
}

func (d *decoder) u32(field string) uint32 {
	if b := d.take(4, field); d.err == nil {
		return le.Uint32(b)
	}
	return 0
}

func (d *decoder) u64(field string) uint64 {
	if b := d.take(8, field); d.err == nil {
		return le.Uint64(b)
	}
	return 0
}

func (d *decoder) hash(field string) Hash {
	var h Hash
	if b := d.take(HashSize, field); d.err == nil {
		copy(h[:], b)
	}
	return h
}

// bin32 reads a u32 length followed by that many bytes (aliasing the input).
func (d *decoder) bin32(field string) []byte {
	n := d.u32(field)
	return d.take(uint64(n), field)
}

// utf8Bytes fails unless b is valid UTF-8.
func (d *decoder) utf8Bytes(b []byte, field string) []byte {
	if d.err == nil && !utf8.Valid(b) {
		d.fail(field, field+" not utf8")
	}
	return b
}

func (d *decoder) str16(field string) string {
	n := d.u16(field)
	return string(d.utf8Bytes(d.take(uint64(n), field), field))
}

func (d *decoder) str32(field string) string {
	return string(d.utf8Bytes(d.bin32(field), field))
}

func appendU16(dst []byte, v uint16) []byte { return le.AppendUint16(dst, v) }
func appendU32(dst []byte, v uint32) []byte { return le.AppendUint32(dst, v) }
func appendU64(dst []byte, v uint64) []byte { return le.AppendUint64(dst, v) }

// appendBin32 appends a u32 length and the bytes. Lengths above 4 GiB
// cannot occur in a valid frame (MaxPayload is far smaller); they are
// clamped to keep the encoding self-consistent and FinishFrame rejects the
// oversize frame.
func appendBin32(dst, b []byte) []byte {
	if uint64(len(b)) > math.MaxUint32 {
		b = b[:math.MaxUint32]
	}
	dst = appendU32(dst, uint32(len(b)))
	return append(dst, b...)
}

func appendStr32(dst []byte, s string) []byte {
	if uint64(len(s)) > math.MaxUint32 {
		s = s[:math.MaxUint32]
	}
	dst = appendU32(dst, uint32(len(s)))
	return append(dst, s...)
}

// appendStr16 appends a u16 length and the string; strings longer than
// 65535 bytes are truncated (callers validate first, see HelloRequest).
func appendStr16(dst []byte, s string) []byte {
	if len(s) > math.MaxUint16 {
		s = s[:math.MaxUint16]
	}
	dst = appendU16(dst, uint16(len(s)))
	return append(dst, s...)
}

func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}
