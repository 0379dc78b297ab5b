package turnlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

func sampleRecord(i uint64) Record {
	r := Record{
		TurnID: i + 1, ParentTurnID: i, ContextID: 1000 + i%7, Depth: uint32(i),
		Tenant: uint32(i % 3), TypeRef: 11, TypeVersion: 2, Encoding: 1, Compression: uint32(i % 2),
		UncompressedLen: uint32(100 + i), Flags: uint32(i%2) * FlagFSRoot, CreatedAtUnixMs: 1_700_000_000_000 + i,
	}
	binary.LittleEndian.PutUint64(r.PayloadHash[:], i*0x9E3779B97F4A7C15)
	r.PayloadHash[31] = byte(i)
	return r
}

func TestRecordRoundTrip(t *testing.T) {
	r := sampleRecord(12345)
	r.TurnID, r.CreatedAtUnixMs = 1<<64-1, 1<<63+5 // all bits of the wide fields
	b := bytes.Repeat([]byte{0xEE}, RecordSize+10)
	r.MarshalTo(b)
	if !bytes.Equal(b[offReserved:offCRC], make([]byte, offCRC-offReserved)) {
		t.Fatalf("reserved bytes not zeroed: %x", b[offReserved:offCRC])
	}
	if !bytes.Equal(b[RecordSize:], bytes.Repeat([]byte{0xEE}, 10)) {
		t.Fatal("MarshalTo wrote past RecordSize")
	}
	got, err := UnmarshalRecord(b)
	if err != nil || got != r {
		t.Fatalf("UnmarshalRecord = %+v, %v; want %+v", got, err, r)
	}
	for i := range RecordSize {
		c := bytes.Clone(b[:RecordSize])
		c[i] ^= 1
		if _, err := UnmarshalRecord(c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipped byte %d: err = %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := UnmarshalRecord(b[:RecordSize-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short record: err = %v, want ErrCorrupt", err)
	}
}

func TestRecordLayout(t *testing.T) {
	r := sampleRecord(3)
	var b [RecordSize]byte
	r.MarshalTo(b[:])
	le := binary.LittleEndian
	tests := []struct {
		name string
		got  uint64
		want uint64
	}{
		{"turn_id", le.Uint64(b[0:]), r.TurnID},
		{"parent_turn_id", le.Uint64(b[8:]), r.ParentTurnID},
		{"context_id", le.Uint64(b[16:]), r.ContextID},
		{"depth", uint64(le.Uint32(b[24:])), uint64(r.Depth)},
		{"tenant", uint64(le.Uint32(b[28:])), uint64(r.Tenant)},
		{"type_ref", uint64(le.Uint32(b[32:])), uint64(r.TypeRef)},
		{"type_version", uint64(le.Uint32(b[36:])), uint64(r.TypeVersion)},
		{"encoding", uint64(le.Uint32(b[40:])), uint64(r.Encoding)},
		{"compression", uint64(le.Uint32(b[44:])), uint64(r.Compression)},
		{"uncompressed_len", uint64(le.Uint32(b[48:])), uint64(r.UncompressedLen)},
		{"flags", uint64(le.Uint32(b[52:])), uint64(r.Flags)},
		{"created_at_unix_ms", le.Uint64(b[56:]), r.CreatedAtUnixMs},
		{"payload_hash[0:8]", le.Uint64(b[64:]), le.Uint64(r.PayloadHash[:])},
		{"crc32", uint64(le.Uint32(b[124:])), uint64(crc32.Checksum(b[:124], crc32.MakeTable(crc32.Castagnoli)))},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
	if !bytes.Equal(b[64:96], r.PayloadHash[:]) {
		t.Errorf("payload_hash = %x, want %x", b[64:96], r.PayloadHash)
	}
}

func FuzzUnmarshalRecord(f *testing.F) {
	var b [RecordSize]byte
	for i := range uint64(3) {
		r := sampleRecord(i)
		r.MarshalTo(b[:])
		f.Add(bytes.Clone(b[:]), false)
		f.Add(bytes.Clone(b[:60]), true)
	}
	// fix lets the fuzzer get past the CRC.
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix && len(b) >= RecordSize {
			binary.LittleEndian.PutUint32(b[offCRC:], crc32.Checksum(b[:offCRC], castagnoli))
		}
		r, err := UnmarshalRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		var re [RecordSize]byte
		r.MarshalTo(re[:])
		if !bytes.Equal(re[:offReserved], b[:offReserved]) {
			t.Fatalf("re-encoded fields differ:\n%x\n%x", re[:offReserved], b[:offReserved])
		}
		if again, err := UnmarshalRecord(re[:]); err != nil || again != r {
			t.Fatalf("round trip = %+v, %v; want %+v", again, err, r)
		}
	})
}
