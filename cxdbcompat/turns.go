package cxdbcompat

// minTurnRecordSize is the smallest encoded TurnRecord: ids, depth, empty
// type id, four u32 fields, hash and a zero payload_len.
const minTurnRecordSize = 8 + 8 + 4 + 4 + 4*4 + HashSize + 4

// TurnRecord is one item of a GET_LAST / GET_BEFORE response:
//
//	turn_id:u64 | parent_turn_id:u64 | depth:u32 | declared_type_id:str32
//	| declared_type_version:u32 | encoding:u32 | compression:u32
//	| uncompressed_len:u32 | content_hash:H32 | payload_len:u32 | payload
//
// payload_len is always written (0 with no bytes when the payload is not
// included), as the official clients expect. Payload aliases the decoded
// response payload.
type TurnRecord struct {
	TurnID              uint64
	ParentTurnID        uint64
	Depth               uint32
	DeclaredTypeID      string
	DeclaredTypeVersion uint32
	Encoding            uint32
	Compression         uint32
	UncompressedLen     uint32
	ContentHash         Hash
	// Payload is nil/empty when the request did not include payloads.
	Payload []byte
}

// AppendTo appends the encoded record.
func (t TurnRecord) AppendTo(dst []byte) []byte {
	dst = appendU64(dst, t.TurnID)
	dst = appendU64(dst, t.ParentTurnID)
	dst = appendU32(dst, t.Depth)
	dst = appendStr32(dst, t.DeclaredTypeID)
	dst = appendU32(dst, t.DeclaredTypeVersion)
	dst = appendU32(dst, t.Encoding)
	dst = appendU32(dst, t.Compression)
	dst = appendU32(dst, t.UncompressedLen)
	dst = append(dst, t.ContentHash[:]...)
	return appendBin32(dst, t.Payload)
}

// AppendTurnListHeader appends the item count that starts a turn list.
// Follow it with exactly count TurnRecord.AppendTo calls to stream a list
// without building a slice.
func AppendTurnListHeader(dst []byte, count uint32) []byte { return appendU32(dst, count) }

// AppendTurnList appends a complete turn list (count, then the records in
// order, oldest first by convention).
func AppendTurnList(dst []byte, turns []TurnRecord) []byte {
	dst = AppendTurnListHeader(dst, uint32(len(turns)))
	for _, t := range turns {
		dst = t.AppendTo(dst)
	}
	return dst
}

// DecodeTurnList decodes a GET_LAST / GET_BEFORE response. The count is
// untrusted: memory is reserved for at most as many records as the payload
// can hold. Trailing bytes are ignored.
func DecodeTurnList(p []byte) ([]TurnRecord, error) {
	d := newDecoder("turn list", p)
	count := d.u32("count")
	if d.err != nil {
		return nil, d.err
	}
	turns := make([]TurnRecord, 0, min(uint64(count), uint64(len(p))/minTurnRecordSize))
	for range count {
		t := decodeTurnRecord(&d)
		if d.err != nil {
			return nil, d.err
		}
		turns = append(turns, t)
	}
	return turns, nil
}

func decodeTurnRecord(d *decoder) TurnRecord {
	return TurnRecord{
		TurnID:              d.u64("turn_id"),
		ParentTurnID:        d.u64("parent_turn_id"),
		Depth:               d.u32("depth"),
		DeclaredTypeID:      d.str32("declared_type_id"),
		DeclaredTypeVersion: d.u32("declared_type_version"),
		Encoding:            d.u32("encoding"),
		Compression:         d.u32("compression"),
		UncompressedLen:     d.u32("uncompressed_len"),
		ContentHash:         d.hash("content_hash"),
		Payload:             d.bin32("payload"),
	}
}
