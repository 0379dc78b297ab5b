package blobpack

import (
	"encoding/binary"
	"runtime"
	"testing"
)

func testEntry(i uint64) Entry {
	var h Hash
	binary.LittleEndian.PutUint64(h[:], i*0x9E3779B97F4A7C15)
	binary.LittleEndian.PutUint64(h[24:], i)
	return Entry{Hash: h, Offset: int64(i) << 10, RawLen: uint32(i), StoredLen: uint32(i / 2), Owner: uint32(i % 7), Codec: Codec(i % 2)}
}

func TestIndex(t *testing.T) {
	x := newIndex(0)
	const n = 100_000
	for i := range uint64(n) {
		e := testEntry(i)
		if !x.insert(&e) {
			t.Fatalf("insert %d: reported present", i)
		}
	}
	e := testEntry(5)
	e.Owner = 99
	if x.insert(&e) {
		t.Fatal("insert of a present hash succeeded")
	}
	if x.len() != n {
		t.Fatalf("len = %d, want %d", x.len(), n)
	}
	for i := range uint64(n) {
		want := testEntry(i)
		if got, ok := x.lookup(&want.Hash); !ok || got != want {
			t.Fatalf("lookup %d = %+v, %v; want %+v", i, got, ok, want)
		}
	}
	absent := testEntry(n + 1)
	if _, ok := x.lookup(&absent.Hash); ok {
		t.Fatal("lookup of an absent hash succeeded")
	}
	big := Entry{Hash: Hash{0xff}, Offset: maxPackSize}
	if !x.insert(&big) {
		t.Fatal("insert of big offset failed")
	}
	if got, _ := x.lookup(&big.Hash); got.Offset != maxPackSize {
		t.Fatalf("offset %d round-tripped as %d", int64(maxPackSize), got.Offset)
	}
}

func TestIndexMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a million entries")
	}
	const n = 1_000_000
	before := heapAlloc()
	x := newIndex(0)
	for i := range uint64(n) {
		e := testEntry(i)
		x.insert(&e)
	}
	used := heapAlloc() - before
	runtime.KeepAlive(x)
	t.Logf("%d entries use %.1f MB (%.1f bytes each)", n, float64(used)/1e6, float64(used)/n)
	if used > 90e6 {
		t.Fatalf("index of %d entries uses %d bytes, want < 90 MB", n, used)
	}
}

func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Removing entries keeps every other one findable, under collisions (a
// small table, many entries) and in every order.
func TestIndexRemove(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		every int // remove entries i with i%every == 0
	}{
		{"few", 10, 2},
		{"half", 5000, 2},
		{"most", 5000, 1},
		{"some", 5000, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newIndex(0)
			for i := range uint64(tc.n) {
				e := testEntry(i)
				x.insert(&e)
			}
			removed := 0
			for i := range uint64(tc.n) {
				if int(i)%tc.every != 0 {
					continue
				}
				e := testEntry(i)
				if !x.remove(&e.Hash) {
					t.Fatalf("remove %d: not found", i)
				}
				if x.remove(&e.Hash) {
					t.Fatalf("remove %d twice: found", i)
				}
				removed++
			}
			if x.len() != tc.n-removed {
				t.Fatalf("len %d, want %d", x.len(), tc.n-removed)
			}
			for i := range uint64(tc.n) {
				want := testEntry(i)
				got, ok := x.lookup(&want.Hash)
				if int(i)%tc.every == 0 {
					if ok {
						t.Fatalf("removed %d still found", i)
					}
					continue
				}
				if !ok || got != want {
					t.Fatalf("lookup %d = %+v, %v; want %+v", i, got, ok, want)
				}
			}
			// Removed hashes go back in.
			for i := range uint64(tc.n) {
				e := testEntry(i)
				if int(i)%tc.every == 0 && !x.insert(&e) {
					t.Fatalf("insert %d again: reported present", i)
				}
			}
			if x.len() != tc.n {
				t.Fatalf("len %d after inserting again, want %d", x.len(), tc.n)
			}
		})
	}
}
