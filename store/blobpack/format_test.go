package blobpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	z := zc()
	tests := []struct {
		name      string
		data      []byte
		wantCodec Codec
	}{
		{"empty", nil, CodecRaw},
		{"small", []byte("hello"), CodecRaw},
		{"127 compressible bytes", bytes.Repeat([]byte{'a'}, 127), CodecRaw},
		{"compressible", textBytes(4096), CodecZstd},
		{"incompressible", randBytes(1, 4096), CodecRaw},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored, codec := z.compress(tt.data, nil)
			if codec != tt.wantCodec {
				t.Fatalf("codec = %v, want %v", codec, tt.wantCodec)
			}
			e := Entry{Hash: hashOf(tt.data), Offset: 1000, RawLen: uint32(len(tt.data)),
				StoredLen: uint32(len(stored)), Owner: 7, Codec: codec}
			rec := appendRecord([]byte("junk"), &e, stored)[4:]
			if int64(len(rec)) != e.recordSize() {
				t.Fatalf("record is %d bytes, want %d", len(rec), e.recordSize())
			}
			got, gotStored, err := decodeRecord(append(rec, "trailing"...), 1000)
			if err != nil {
				t.Fatalf("decodeRecord: %v", err)
			}
			if got != e || !bytes.Equal(gotStored, stored) {
				t.Fatalf("decodeRecord = %+v, want %+v", got, e)
			}
			data, err := z.decompress(&got, gotStored)
			if err != nil || !bytes.Equal(data, tt.data) {
				t.Fatalf("decompress = %d bytes, %v; want %d bytes", len(data), err, len(tt.data))
			}
		})
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	e := Entry{Hash: hashOf([]byte("abc")), RawLen: 3, StoredLen: 3, Codec: CodecRaw}
	good := appendRecord(nil, &e, []byte("abc"))
	tests := []struct {
		name   string
		mutate func(b []byte) []byte
	}{
		{"empty", func([]byte) []byte { return nil }},
		{"short header", func(b []byte) []byte { return b[:headerSize-1] }},
		{"short record", func(b []byte) []byte { return b[:len(b)-1] }},
		{"bad magic", func(b []byte) []byte { b[0] ^= 1; return b }},
		{"flipped stored byte", func(b []byte) []byte { b[headerSize] ^= 0x80; return b }},
		{"flipped crc", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
		{"bad version", func(b []byte) []byte { b[offVersion] = 2; return fixCRC(b) }},
		{"unknown codec", func(b []byte) []byte { b[offCodec] = 9; return fixCRC(b) }},
		{"reserved bits", func(b []byte) []byte { b[offReserved+1] = 1; return fixCRC(b) }},
		{"raw length mismatch", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[offRawLen:], 4)
			return fixCRC(b)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mutate(bytes.Clone(good))
			if _, _, err := decodeRecord(b, 0); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decodeRecord = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestIndexEntryRoundTrip(t *testing.T) {
	e := Entry{Hash: hashOf([]byte("x")), Offset: 1<<40 + 3, RawLen: 9, StoredLen: 5, Owner: 42, Codec: CodecZstd}
	var b [idxEntrySize]byte
	putIndexEntry(b[:], &e)
	if got, ok := decodeIndexEntry(b[:]); !ok || got != e {
		t.Fatalf("decodeIndexEntry = %+v, %v; want %+v", got, ok, e)
	}
	for i := range b {
		c := b
		c[i] ^= 1
		if _, ok := decodeIndexEntry(c[:]); ok {
			t.Fatalf("flipped byte %d accepted", i)
		}
	}
}

// fixCRC recomputes the CRC of the record that b starts with, as far as b
// holds it.
func fixCRC(b []byte) []byte {
	if len(b) < headerSize {
		return b
	}
	n := int64(recordOverhead) + int64(binary.LittleEndian.Uint32(b[offStoredLen:]))
	if int64(len(b)) < n {
		return b
	}
	binary.LittleEndian.PutUint32(b[n-trailerSize:], crc32.Checksum(b[:n-trailerSize], castagnoli))
	return b
}

func FuzzDecodeRecord(f *testing.F) {
	z := zc()
	for _, data := range [][]byte{nil, []byte("small"), textBytes(600), randBytes(2, 300)} {
		stored, codec := z.compress(data, nil)
		e := Entry{Hash: hashOf(data), RawLen: uint32(len(data)), StoredLen: uint32(len(stored)), Owner: 3, Codec: codec}
		rec := appendRecord(nil, &e, stored)
		f.Add(rec, false)
		f.Add(rec[:len(rec)/2], true)
	}
	// fix lets the fuzzer get past the CRC to the header checks and zstd.
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix {
			b = fixCRC(b)
		}
		e, stored, err := decodeRecord(b, 0)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if re := appendRecord(nil, &e, stored); !bytes.Equal(re, b[:e.recordSize()]) {
			t.Fatalf("re-encoded record differs")
		}
		if e.RawLen > 1<<20 {
			return // a forged raw_len would only cost a big allocation
		}
		data, err := z.decompress(&e, stored)
		if err == nil && len(data) != int(e.RawLen) {
			t.Fatalf("decompress returned %d bytes, want %d", len(data), e.RawLen)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decompress error %v does not wrap ErrCorrupt", err)
		}
	})
}

// TestCompressAllSharesOneBufferSafely compresses a group whose items'
// zstd forms share one buffer, in one goroutine and in several, with
// incompressible items (whose zstd form would not fit its region) among
// them, and checks that every stored form decodes to its own item.
func TestCompressAllSharesOneBufferSafely(t *testing.T) {
	z := zc()
	for _, n := range []int{3, 40} { // 40 items pass parallelMinBytes
		var items []PutItem
		var todo []int
		for i := range n {
			data := uniqueText(uint64(i), 1000)
			if i%3 == 1 {
				data = randBytes(uint64(i), 1000)
			}
			items = append(items, PutItem{Hash: hashOf(data), Data: data})
			todo = append(todo, i)
		}
		stored, codecs := make([][]byte, n), make([]Codec, n)
		z.compressAll(items, todo, stored, codecs)
		for k, i := range todo {
			e := Entry{RawLen: uint32(len(items[i].Data)), Codec: codecs[k]}
			got, err := z.decompress(&e, stored[k])
			if err != nil || !bytes.Equal(got, items[i].Data) {
				t.Fatalf("%d items: item %d (codec %v) decodes to %d bytes, %v", n, i, codecs[k], len(got), err)
			}
			if wantRaw := i%3 == 1; wantRaw != (codecs[k] == CodecRaw) {
				t.Errorf("%d items: item %d codec %v", n, i, codecs[k])
			}
		}
	}
}
