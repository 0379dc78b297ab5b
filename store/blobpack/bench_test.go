package blobpack

import (
	"encoding/binary"
	"testing"
	"time"
)

// benchBlob returns a 1 KiB blob unique to seq that zstd shrinks to about
// half: a JSON-like text with a random-ish tail.
func benchBlob(seq uint64) []byte {
	b := textBytes(1024)
	copy(b[512:], randBytes(seq, 512))
	binary.LittleEndian.PutUint64(b, seq)
	return b
}

// BenchmarkPut1KiB measures Put of batches of 64 new 1 KiB blobs,
// including the fsync; "pre-encoded" leaves compression to the callers.
func BenchmarkPut1KiB(b *testing.B) {
	for _, pre := range []bool{false, true} {
		name := map[bool]string{false: "encode-in-put", true: "pre-encoded"}[pre]
		b.Run(name, func(b *testing.B) { benchmarkPut(b, pre) })
	}
}

func benchmarkPut(b *testing.B, preEncode bool) {
	b.Helper()
	const batch = 64
	p := openPack(b, b.TempDir(), Options{})
	items := make([]PutItem, batch)
	b.SetBytes(batch * 1024)
	seq := uint64(0)
	for b.Loop() {
		b.StopTimer()
		for i := range items {
			items[i] = item(benchBlob(seq), 1)
			if preEncode {
				items[i].Stored, items[i].Codec = Encode(items[i].Data)
			}
			seq++
		}
		b.StartTimer()
		if _, err := p.Put(items); err != nil {
			b.Fatal(err)
		}
	}
	s := p.Stats()
	b.ReportMetric(float64(s.PackBytes)/float64(s.RawBytes), "stored/raw")
}

func BenchmarkRead1KiB(b *testing.B) {
	p := openPack(b, b.TempDir(), Options{})
	const n = 4096
	hashes := make([]Hash, n)
	items := make([]PutItem, 0, 64)
	for i := range uint64(n) {
		it := item(benchBlob(i), 1)
		hashes[i] = it.Hash
		if items = append(items, it); len(items) == cap(items) {
			put(b, p, items...)
			items = items[:0]
		}
	}
	b.Run("serial", func(b *testing.B) {
		b.SetBytes(1024)
		i := 0
		for b.Loop() {
			if _, err := p.Read(hashes[i%n]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetBytes(1024)
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := p.Read(hashes[i%n]); err != nil {
					b.Fatal(err)
				}
				i += 7
			}
		})
	})
}

// BenchmarkEncode1KiB measures the pack's compression of a 1 KiB blob,
// with the caches warm from the previous call ("warm") and after 8 MiB of
// other memory was touched ("cold"), as between the groups of a lone
// client, whose appends come one at a time among other work. It reports
// the time of the Encode calls alone (encode-ns), timed around each call:
// ns/op includes the touching. Run:
//
//	go test ./store/blobpack/ -run '^$' -bench Encode1KiB -count 3
func BenchmarkEncode1KiB(b *testing.B) {
	blobs := make([][]byte, 256)
	for i := range blobs {
		blobs[i] = benchBlob(uint64(i))
	}
	for _, cold := range []bool{false, true} {
		b.Run(map[bool]string{false: "warm", true: "cold"}[cold], func(b *testing.B) {
			other := make([]byte, 8<<20)
			var took time.Duration
			stored := 0
			for n := 0; b.Loop(); n++ {
				if cold {
					for i := 0; i < len(other); i += 64 {
						other[i]++
					}
				}
				start := time.Now()
				out, _ := Encode(blobs[n%len(blobs)])
				took += time.Since(start)
				stored += len(out)
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N), "encode-ns")
			b.ReportMetric(float64(stored)/float64(b.N), "stored-bytes")
		})
	}
}
