package blobpack

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"unsafe"
)

func sameBytes(a, b []byte) bool { return unsafe.SliceData(a) == unsafe.SliceData(b) }

func TestViewCachesAndReadCopies(t *testing.T) {
	p := openPack(t, t.TempDir(), Options{})
	data := textBytes(5000)
	put(t, p, item(data, 1))
	h := hashOf(data)

	v1, err := p.View(h)
	if err != nil || !bytes.Equal(v1, data) {
		t.Fatalf("View = %d bytes, %v", len(v1), err)
	}
	v2, err := p.View(h)
	if err != nil || !sameBytes(v1, v2) {
		t.Fatalf("second View did not come from the cache (err %v)", err)
	}
	r, err := p.Read(h)
	if err != nil || !bytes.Equal(r, data) || sameBytes(r, v1) {
		t.Fatalf("Read must return a copy of its own (err %v)", err)
	}
	if _, err := p.View(Hash{1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("View(unknown) = %v, want ErrNotFound", err)
	}
	closePack(t, p)
	if _, err := p.View(h); !errors.Is(err, ErrClosed) {
		t.Fatalf("View after Close = %v, want ErrClosed", err)
	}
	if _, err := p.Read(h); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close = %v, want ErrClosed", err)
	}
}

func TestViewRereadsACachedBlobThatChanged(t *testing.T) {
	p := openPack(t, t.TempDir(), Options{})
	data := textBytes(3000)
	put(t, p, item(data, 1))
	h := hashOf(data)
	v, err := p.View(h)
	if err != nil {
		t.Fatal(err)
	}
	v[10] ^= 0xff // a caller breaking the read-only rule
	got, err := p.View(h)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("View after the cached bytes changed = %q..., %v; want the stored blob", got[:20], err)
	}
	if r, err := p.Read(h); err != nil || !bytes.Equal(r, data) {
		t.Fatalf("Read after the cached bytes changed: %v", err)
	}
}

func TestViewSkipsTheCacheWhenDisabledOrTooLarge(t *testing.T) {
	big := textBytes(maxCachedBlob + 1)
	small := textBytes(100)
	for _, tt := range []struct {
		name string
		opts Options
		data []byte
	}{
		{"disabled", Options{CacheBytes: -1}, small},
		{"too large", Options{}, big},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := openPack(t, t.TempDir(), tt.opts)
			put(t, p, item(tt.data, 1))
			a, err := p.View(hashOf(tt.data))
			if err != nil || !bytes.Equal(a, tt.data) {
				t.Fatalf("View: %v", err)
			}
			b, _ := p.View(hashOf(tt.data))
			if sameBytes(a, b) {
				t.Fatal("View served the blob from a cache")
			}
		})
	}
}

func TestCacheStaysWithinItsBudget(t *testing.T) {
	const budget = 256 << 10
	c := newBlobCache(budget)
	for i := range uint64(5000) {
		data := uniqueText(i, 100+int(i%1900)) // up to maxBlob (2 KiB here)
		h := hashOf(data)
		c.put(&h, data)
		if got, ok := c.get(&h); !ok || !bytes.Equal(got, data) {
			t.Fatalf("blob %d not served right after put", i)
		}
	}
	// Each shard holds two generations, each may overrun by one blob.
	slack := cacheShards * 2 * (c.maxBlob + cacheEntryOverhead)
	if n := c.bytes(); n > budget+slack {
		t.Fatalf("cache holds %d bytes, budget %d (+%d)", n, budget, slack)
	}
	if newBlobCache(1024) != nil {
		t.Fatal("a tiny budget should mean no cache")
	}
}

func TestViewConcurrentWithPut(t *testing.T) {
	p := openPack(t, t.TempDir(), Options{CacheBytes: 128 << 10})
	var blobs [][]byte
	for i := range uint64(300) {
		blobs = append(blobs, uniqueText(i, 500+int(i)*7))
	}
	put(t, p, items(blobs[:100])...)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 100; i < len(blobs); i += 50 {
			put(t, p, items(blobs[i:i+50])...)
		}
	})
	for r := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				data := blobs[(i*7+r)%100]
				got, err := p.View(hashOf(data))
				if err != nil || !bytes.Equal(got, data) {
					t.Errorf("View of blob %d: %v", (i*7+r)%100, err)
					return
				}
			}
		})
	}
	wg.Wait()
	checkBlobs(t, p, blobs...)
}

func items(blobs [][]byte) []PutItem {
	out := make([]PutItem, len(blobs))
	for i, b := range blobs {
		out[i] = item(b, 1)
	}
	return out
}

// BenchmarkView1KiB reads the same 640 blobs (ten turns of 64 contexts)
// over and over, as GET_LAST does: after the first pass every View is a
// cache hit. Compare BenchmarkRead1KiB, which decompresses every time.
func BenchmarkView1KiB(b *testing.B) {
	p := openPack(b, b.TempDir(), Options{})
	hashes := make([]Hash, 640)
	for i := range hashes {
		data := uniqueText(uint64(i), 1024)
		put(b, p, item(data, 1))
		hashes[i] = hashOf(data)
	}
	b.SetBytes(1024)
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			if _, err := p.View(hashes[i%len(hashes)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
