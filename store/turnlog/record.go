package turnlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// RecordSize is the size of every record in the log.
const RecordSize = 128

// Record field offsets, see doc.go.
const (
	offTurnID          = 0
	offParentTurnID    = 8
	offContextID       = 16
	offDepth           = 24
	offTenant          = 28
	offTypeRef         = 32
	offTypeVersion     = 36
	offEncoding        = 40
	offCompression     = 44
	offUncompressedLen = 48
	offFlags           = 52
	offCreatedAt       = 56
	offPayloadHash     = 64
	offReserved        = 96
	offCRC             = 124
)

// Flags bits.
const (
	// FlagFSRoot marks a turn that had a filesystem root attached when it
	// was appended.
	FlagFSRoot uint32 = 1 << 0
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one turn as stored in the log.
type Record struct {
	TurnID          uint64
	ParentTurnID    uint64 // 0 for a root turn
	ContextID       uint64
	Depth           uint32
	Tenant          uint32
	TypeRef         uint32 // the caller's number for the declared type id
	TypeVersion     uint32
	Encoding        uint32
	Compression     uint32 // as sent by the client
	UncompressedLen uint32
	Flags           uint32 // FlagFSRoot, ...
	CreatedAtUnixMs uint64
	PayloadHash     [32]byte // BLAKE3-256 of the uncompressed payload
}

// MarshalTo encodes r into b[:RecordSize], reserved bytes zeroed and the
// CRC set. It panics if b is shorter than RecordSize.
func (r *Record) MarshalTo(b []byte) {
	_ = b[RecordSize-1]
	le := binary.LittleEndian
	le.PutUint64(b[offTurnID:], r.TurnID)
	le.PutUint64(b[offParentTurnID:], r.ParentTurnID)
	le.PutUint64(b[offContextID:], r.ContextID)
	le.PutUint32(b[offDepth:], r.Depth)
	le.PutUint32(b[offTenant:], r.Tenant)
	le.PutUint32(b[offTypeRef:], r.TypeRef)
	le.PutUint32(b[offTypeVersion:], r.TypeVersion)
	le.PutUint32(b[offEncoding:], r.Encoding)
	le.PutUint32(b[offCompression:], r.Compression)
	le.PutUint32(b[offUncompressedLen:], r.UncompressedLen)
	le.PutUint32(b[offFlags:], r.Flags)
	le.PutUint64(b[offCreatedAt:], r.CreatedAtUnixMs)
	copy(b[offPayloadHash:], r.PayloadHash[:])
	clear(b[offReserved:offCRC])
	le.PutUint32(b[offCRC:], crc32.Checksum(b[:offCRC], castagnoli))
}

// UnmarshalRecord decodes a record from b[:RecordSize]. It fails, wrapping
// ErrCorrupt, if b is short or the CRC does not match. Reserved bytes are
// covered by the CRC but otherwise ignored.
func UnmarshalRecord(b []byte) (Record, error) {
	if len(b) < RecordSize {
		return Record{}, fmt.Errorf("turnlog: partial record (%d bytes): %w", len(b), ErrCorrupt)
	}
	le := binary.LittleEndian
	if got, want := crc32.Checksum(b[:offCRC], castagnoli), le.Uint32(b[offCRC:]); got != want {
		return Record{}, fmt.Errorf("turnlog: record crc %#08x, want %#08x: %w", got, want, ErrCorrupt)
	}
	r := Record{
		TurnID:          le.Uint64(b[offTurnID:]),
		ParentTurnID:    le.Uint64(b[offParentTurnID:]),
		ContextID:       le.Uint64(b[offContextID:]),
		Depth:           le.Uint32(b[offDepth:]),
		Tenant:          le.Uint32(b[offTenant:]),
		TypeRef:         le.Uint32(b[offTypeRef:]),
		TypeVersion:     le.Uint32(b[offTypeVersion:]),
		Encoding:        le.Uint32(b[offEncoding:]),
		Compression:     le.Uint32(b[offCompression:]),
		UncompressedLen: le.Uint32(b[offUncompressedLen:]),
		Flags:           le.Uint32(b[offFlags:]),
		CreatedAtUnixMs: le.Uint64(b[offCreatedAt:]),
	}
	copy(r.PayloadHash[:], b[offPayloadHash:offReserved])
	return r, nil
}
