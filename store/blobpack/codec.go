package blobpack

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
)

// zcodec is the process-wide zstd encoder/decoder pair. EncodeAll and
// DecodeAll are safe for concurrent use; each call borrows one of
// GOMAXPROCS internal coders. Neither starts goroutines.
type zcodec struct {
	enc   *zstd.Encoder // level 3: larger blobs
	small *zstd.Encoder // level 1: blobs under smallBlob bytes
	dec   *zstd.Decoder
}

// smallBlob is the size under which blobs are compressed at level 1
// (zstd.SpeedFastest) rather than 3: turn payloads are mostly this small,
// and level 3's CPU, a third of the server's on the append path, buys
// them little (docs/performance.md, "zstd level 1 for blobs under 4 KiB").
// Any level decodes alike.
const smallBlob = 4 << 10

// zc returns the shared codec. Its options are constant, so failing to
// build it is a programming error.
var zc = sync.OnceValue(func() *zcodec {
	enc, small := newEncoder(zstd.SpeedDefault), newEncoder(zstd.SpeedFastest)
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		// DecodeAll may only fill the capacity of dst, which decompress
		// sizes to the record's raw_len: a frame never decodes to more.
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderMaxMemory(1<<32),
	)
	if err != nil {
		panic(fmt.Sprintf("blobpack: zstd decoder: %v", err))
	}
	return &zcodec{enc: enc, small: small, dec: dec}
})

func newEncoder(level zstd.EncoderLevel) *zstd.Encoder {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(level),
		zstd.WithEncoderCRC(false),     // the record CRC covers the stored bytes
		zstd.WithLowerEncoderMem(true), // smaller tables: most blobs are small, and resetting them dominates
		zstd.WithEncoderConcurrency(0),
	)
	if err != nil {
		panic(fmt.Sprintf("blobpack: zstd encoder: %v", err))
	}
	return enc
}

// Encode returns the stored form of a blob and its codec, as Put would
// store it. Callers may run it in parallel ahead of Put and pass the result
// in PutItem.Stored and PutItem.Codec, taking compression off the single
// writer's path. Encode is safe for concurrent use.
func Encode(data []byte) (stored []byte, codec Codec) { return zc().compress(data, nil) }

// compress returns the stored form of data and its codec: zstd when data
// is at least compressMinLen bytes and zstd makes it smaller, else data
// itself. The zstd form is written to dst when it fits (len(dst) >=
// len(data)), else to a new buffer.
func (z *zcodec) compress(data, dst []byte) ([]byte, Codec) {
	if len(data) < compressMinLen {
		return data, CodecRaw
	}
	if len(dst) < len(data) {
		dst = make([]byte, len(data))
	}
	// A capacity of len(data) bounds the output: what does not fit is not
	// smaller, and is stored raw.
	enc := z.enc
	if len(data) < smallBlob {
		enc = z.small
	}
	out := enc.EncodeAll(data, dst[:0:len(data)])
	if len(out) >= len(data) {
		return data, CodecRaw
	}
	return out, CodecZstd
}

// decompress returns the raw bytes of a CRC-verified record.
func (z *zcodec) decompress(e *Entry, stored []byte) ([]byte, error) {
	if e.Codec == CodecRaw {
		return stored, nil
	}
	out, err := z.dec.DecodeAll(stored, make([]byte, 0, e.RawLen))
	if err != nil {
		return nil, fmt.Errorf("blobpack: record at %d: zstd: %v: %w", e.Offset, err, ErrCorrupt)
	}
	if len(out) != int(e.RawLen) {
		return nil, fmt.Errorf("blobpack: record at %d: decoded %d bytes, want %d: %w", e.Offset, len(out), e.RawLen, ErrCorrupt)
	}
	return out, nil
}

// decompressOwned is decompress for stored bytes the caller will reuse:
// the result never aliases stored.
func (z *zcodec) decompressOwned(e *Entry, stored []byte) ([]byte, error) {
	if e.Codec == CodecRaw {
		return bytes.Clone(stored), nil
	}
	return z.decompress(e, stored)
}

// parallelMinBytes is the amount of data to compress from which
// compressAll spreads the work over GOMAXPROCS goroutines.
const parallelMinBytes = 16 << 10

// compressAll sets stored[k] and codecs[k] for items[todo[k]], compressing
// the items that do not carry their stored form. Their zstd forms share one
// buffer, each in a region as long as its input.
func (z *zcodec) compressAll(items []PutItem, todo []int, stored [][]byte, codecs []Codec) {
	var work []int // positions in todo that need compressing
	total := 0
	for k, i := range todo {
		if it := &items[i]; it.Stored != nil {
			stored[k], codecs[k] = it.Stored, it.Codec
		} else {
			work = append(work, k)
			total += len(it.Data)
		}
	}
	arena := make([]byte, total)
	dst := make([][]byte, len(work)) // work[w]'s region of arena
	for w, off := 0, 0; w < len(work); w++ {
		n := len(items[todo[work[w]]].Data)
		dst[w], off = arena[off:off+n:off+n], off+n
	}
	workers := min(runtime.GOMAXPROCS(0), len(work))
	if workers < 2 || total < parallelMinBytes {
		for w, k := range work {
			stored[k], codecs[k] = z.compress(items[todo[k]].Data, dst[w])
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for w := next.Add(1) - 1; w < int64(len(work)); w = next.Add(1) - 1 {
				k := work[w]
				stored[k], codecs[k] = z.compress(items[todo[k]].Data, dst[w])
			}
		})
	}
	wg.Wait()
}
