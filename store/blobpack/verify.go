package blobpack

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/store/segment"
)

// Defect is a damaged part of a file found by a verification.
type Defect struct {
	Offset, End int64
	Reason      string
}

// Verify reads every record of the pack in dir, in all its segments, read-only, without its
// index: each record must pass its CRC and decompress to RawLen bytes whose
// BLAKE3 is its hash. visit gets each good entry; a bad record is a Defect
// and the scan goes on at the next valid record. progress, if not nil, is
// told of the bytes read so far and the pack's size.
func Verify(dir string, visit func(Entry), progress func(done, total int64)) ([]Defect, error) {
	var visitContent func(Entry, []byte)
	if visit != nil {
		visitContent = func(e Entry, _ []byte) { visit(e) }
	}
	return VerifyContent(dir, visitContent, progress)
}

// VerifyContent is Verify telling visit each good record's blob as well,
// uncompressed (valid only during the call): what a check of the bytes the
// pack still holds, such as an erasure's, reads.
func VerifyContent(dir string, visit func(Entry, []byte), progress func(done, total int64)) ([]Defect, error) {
	set, err := segment.Open(Layout(dir), segment.Options{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("blobpack: verify: %w", err)
	}
	defer set.Close()
	p := &Pack{pack: set, z: zc(), opts: Options{}}
	v := verifier{p: p, size: set.Size(), visit: visit, progress: progress}
	return v.run()
}

type verifier struct {
	p        *Pack
	size     int64
	visit    func(Entry, []byte)
	progress func(done, total int64)
	defects  []Defect
}

func (v *verifier) run() ([]Defect, error) {
	var rec []byte
	off := int64(0)
	r := bufio.NewReaderSize(io.NewSectionReader(v.p.pack, 0, v.size), scanBufSize)
	for off < v.size {
		e, err := readRecord(r, off, v.size, &rec)
		var raw []byte
		if err == nil {
			raw, err = v.checkContent(&e, rec[headerSize:e.recordSize()-4])
		}
		switch {
		case err == nil:
			if v.visit != nil {
				v.visit(e, raw)
			}
			off = e.end()
		case errors.Is(err, ErrCorrupt):
			next, found, rerr := v.p.resync(off+1, v.size)
			if rerr != nil {
				return v.defects, rerr
			}
			if !found {
				if zero, zerr := v.p.pack.ZeroTail(off, v.size); zerr == nil && zero {
					return v.defects, nil // the reservation
				}
				v.defects = append(v.defects, Defect{off, v.size, err.Error()})
				return v.defects, nil
			}
			v.defects = append(v.defects, Defect{off, next, err.Error()})
			off = next
			r.Reset(io.NewSectionReader(v.p.pack, off, v.size-off))
		default:
			return v.defects, err
		}
		if v.progress != nil {
			v.progress(off, v.size)
		}
	}
	return v.defects, nil
}

// checkContent decompresses a record's stored bytes and checks their hash.
func (v *verifier) checkContent(e *Entry, stored []byte) ([]byte, error) {
	raw, err := v.p.z.decompress(e, stored)
	if err != nil {
		return nil, fmt.Errorf("blobpack: record at %d: %w: %w", e.Offset, err, ErrCorrupt)
	}
	if blake3.Sum256(raw) != e.Hash {
		return nil, fmt.Errorf("blobpack: record at %d: content does not hash to %x: %w", e.Offset, e.Hash, ErrCorrupt)
	}
	return raw, nil
}
