package blobpack

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Record header layout (little-endian), see doc.go.
const (
	offMagic     = 0
	offVersion   = 4
	offCodec     = 5
	offReserved  = 6
	offOwner     = 8
	offRawLen    = 12
	offStoredLen = 16
	offHash      = 20

	headerSize     = 52
	trailerSize    = 4 // crc32
	recordOverhead = headerSize + trailerSize

	// magic is "CBBP" as it appears on disk.
	magic          = uint32('C') | uint32('B')<<8 | uint32('B')<<16 | uint32('P')<<24
	formatVersion  = 1
	compressMinLen = 128 // blobs shorter than this are stored raw
)

// Index entry layout (little-endian), see doc.go.
const (
	idxOffHash      = 0
	idxOffOffset    = 32
	idxOffRawLen    = 40
	idxOffStoredLen = 44
	idxOffOwner     = 48
	idxOffCodec     = 52
	idxOffCRC       = 60

	idxEntrySize = 64
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Hash is the BLAKE3-256 digest of a blob's uncompressed bytes.
type Hash = [32]byte

// Codec says how a blob's bytes are stored in the pack.
type Codec uint8

// Codecs.
const (
	CodecRaw  Codec = 0 // stored as is
	CodecZstd Codec = 1 // one zstd frame
)

// String returns "raw", "zstd" or "codec(N)".
func (c Codec) String() string {
	switch c {
	case CodecRaw:
		return "raw"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// Entry locates one blob in the pack.
type Entry struct {
	Hash      Hash   // BLAKE3-256 of the uncompressed bytes
	Offset    int64  // offset of the record header in blobs.pack
	RawLen    uint32 // uncompressed length
	StoredLen uint32 // length of the stored (possibly compressed) bytes
	Owner     uint32 // tenant of the first writer
	Codec     Codec  // how the stored bytes are encoded
}

// recordSize is the size of e's whole record in the pack.
func (e *Entry) recordSize() int64 { return recordOverhead + int64(e.StoredLen) }

// end is the offset just past e's record.
func (e *Entry) end() int64 { return e.Offset + e.recordSize() }

// putHeader writes the record header for e into b[:headerSize].
func putHeader(b []byte, e *Entry) {
	_ = b[headerSize-1]
	binary.LittleEndian.PutUint32(b[offMagic:], magic)
	b[offVersion] = formatVersion
	b[offCodec] = byte(e.Codec)
	binary.LittleEndian.PutUint16(b[offReserved:], 0)
	binary.LittleEndian.PutUint32(b[offOwner:], e.Owner)
	binary.LittleEndian.PutUint32(b[offRawLen:], e.RawLen)
	binary.LittleEndian.PutUint32(b[offStoredLen:], e.StoredLen)
	copy(b[offHash:], e.Hash[:])
}

// appendRecord appends the record for e with the given stored bytes to b.
func appendRecord(b []byte, e *Entry, stored []byte) []byte {
	start := len(b)
	b = append(b, make([]byte, headerSize)...)
	putHeader(b[start:], e)
	b = append(b, stored...)
	crc := crc32.Checksum(b[start:], castagnoli)
	return binary.LittleEndian.AppendUint32(b, crc)
}

// parseHeader decodes the fixed header fields of a record. It checks only
// the magic; the rest is trusted once the record's CRC has been checked.
func parseHeader(b []byte, off int64) (Entry, error) {
	if len(b) < headerSize {
		return Entry{}, fmt.Errorf("blobpack: record at %d: short header (%d bytes): %w", off, len(b), ErrCorrupt)
	}
	if m := binary.LittleEndian.Uint32(b[offMagic:]); m != magic {
		return Entry{}, fmt.Errorf("blobpack: record at %d: bad magic %#08x: %w", off, m, ErrCorrupt)
	}
	e := Entry{
		Offset:    off,
		Codec:     Codec(b[offCodec]),
		Owner:     binary.LittleEndian.Uint32(b[offOwner:]),
		RawLen:    binary.LittleEndian.Uint32(b[offRawLen:]),
		StoredLen: binary.LittleEndian.Uint32(b[offStoredLen:]),
	}
	copy(e.Hash[:], b[offHash:offHash+32])
	return e, nil
}

// decodeRecord decodes the record at the start of b, which was read from
// offset off. It returns the record's entry and its stored bytes (aliasing
// b). All failures wrap ErrCorrupt; a b too short for the record it starts
// is one of them.
func decodeRecord(b []byte, off int64) (Entry, []byte, error) {
	e, err := parseHeader(b, off)
	if err != nil {
		return Entry{}, nil, err
	}
	n := e.recordSize()
	if int64(len(b)) < n {
		return Entry{}, nil, fmt.Errorf("blobpack: record at %d: short record (%d of %d bytes): %w", off, len(b), n, ErrCorrupt)
	}
	want := binary.LittleEndian.Uint32(b[n-trailerSize:])
	if got := crc32.Checksum(b[:n-trailerSize], castagnoli); got != want {
		return Entry{}, nil, fmt.Errorf("blobpack: record at %d: crc %#08x, want %#08x: %w", off, got, want, ErrCorrupt)
	}
	if err := checkHeader(b, &e); err != nil {
		return Entry{}, nil, err
	}
	return e, b[headerSize : n-trailerSize], nil
}

// checkHeader validates the fields of a CRC-verified header.
func checkHeader(b []byte, e *Entry) error {
	switch {
	case b[offVersion] != formatVersion:
		return fmt.Errorf("blobpack: record at %d: unsupported version %d: %w", e.Offset, b[offVersion], ErrCorrupt)
	case binary.LittleEndian.Uint16(b[offReserved:]) != 0:
		return fmt.Errorf("blobpack: record at %d: reserved bits set: %w", e.Offset, ErrCorrupt)
	case e.Codec != CodecRaw && e.Codec != CodecZstd:
		return fmt.Errorf("blobpack: record at %d: unknown %v: %w", e.Offset, e.Codec, ErrCorrupt)
	case e.Codec == CodecRaw && e.StoredLen != e.RawLen:
		return fmt.Errorf("blobpack: record at %d: raw record with stored_len %d != raw_len %d: %w",
			e.Offset, e.StoredLen, e.RawLen, ErrCorrupt)
	}
	return nil
}

// putIndexEntry writes the index entry for e into b[:idxEntrySize].
func putIndexEntry(b []byte, e *Entry) {
	_ = b[idxEntrySize-1]
	copy(b[idxOffHash:], e.Hash[:])
	binary.LittleEndian.PutUint64(b[idxOffOffset:], uint64(e.Offset))
	binary.LittleEndian.PutUint32(b[idxOffRawLen:], e.RawLen)
	binary.LittleEndian.PutUint32(b[idxOffStoredLen:], e.StoredLen)
	binary.LittleEndian.PutUint32(b[idxOffOwner:], e.Owner)
	b[idxOffCodec] = byte(e.Codec)
	clear(b[idxOffCodec+1 : idxOffCRC])
	binary.LittleEndian.PutUint32(b[idxOffCRC:], crc32.Checksum(b[:idxOffCRC], castagnoli))
}

// decodeIndexEntry decodes one index entry; ok is false on a CRC mismatch
// or an offset that cannot be a pack offset.
func decodeIndexEntry(b []byte) (e Entry, ok bool) {
	_ = b[idxEntrySize-1]
	if crc32.Checksum(b[:idxOffCRC], castagnoli) != binary.LittleEndian.Uint32(b[idxOffCRC:]) {
		return Entry{}, false
	}
	off := binary.LittleEndian.Uint64(b[idxOffOffset:])
	if off > maxPackSize {
		return Entry{}, false
	}
	copy(e.Hash[:], b[idxOffHash:idxOffHash+32])
	e.Offset = int64(off)
	e.RawLen = binary.LittleEndian.Uint32(b[idxOffRawLen:])
	e.StoredLen = binary.LittleEndian.Uint32(b[idxOffStoredLen:])
	e.Owner = binary.LittleEndian.Uint32(b[idxOffOwner:])
	e.Codec = Codec(b[idxOffCodec])
	return e, true
}

// End is the pack offset just past the entry's record.
func (e Entry) End() int64 { return e.end() }
