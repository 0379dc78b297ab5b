package bytecache

import (
	"bytes"
	"fmt"
	"math"
	"sync"
	"testing"
	"unsafe"
)

// checkCache verifies a cache's accounting: each shard's bytes are the sum
// of its entries' sizes, within its limit, and its list holds exactly the
// entries of its map.
func checkCache[K comparable](t *testing.T, c *Cache[K]) {
	t.Helper()
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		var sum int64
		n := 0
		for e := sh.lru.next; e != &sh.lru; e = e.next {
			if sh.m[e.key] != e {
				t.Errorf("shard %d: listed entry %v is not in the map", i, e.key)
			}
			sum += e.size
			n++
		}
		if n != len(sh.m) || sum != sh.used || sh.used > sh.limit {
			t.Errorf("shard %d: %d listed, %d mapped, %d bytes listed, %d used, limit %d",
				i, n, len(sh.m), sum, sh.used, sh.limit)
		}
		sh.mu.Unlock()
	}
}

// sameShardKeys returns n int keys that fall in one shard of c, so that a
// test can fill a shard and watch its evictions.
func sameShardKeys(c *Cache[int], n int) []int {
	want := c.shard(0)
	keys := []int{0}
	for k := 1; len(keys) < n; k++ {
		if c.shard(k) == want {
			keys = append(keys, k)
		}
	}
	return keys
}

// value returns s as a value whose capacity is its length, so that the
// bytes an entry is charged are known exactly.
func value(s string) []byte {
	b := []byte(s)
	return b[:len(b):len(b)]
}

// charge is what an entry of key type K, keyBytes and a value of n bytes
// costs.
func charge[K comparable](keyBytes, n int) int64 {
	return int64(keyBytes+n) + entryOverhead[K]()
}

// TestEntryOverhead: an entry keyed by two strings is charged 136 bytes
// (the card cache's 128 before the stamp, plus the stamp).
func TestEntryOverhead(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the figure is for 64-bit platforms")
	}
	if got := entryOverhead[testKey](); got != 136 {
		t.Fatalf("entryOverhead[testKey] = %d, want 136", got)
	}
}

func TestCache(t *testing.T) {
	// op is a call on the cache. Keys are indexes into keys that share a
	// shard, so a small shard budget shows the evictions.
	type op struct {
		do      string // "put", "get" or "drop"
		key     int
		version int64
		// value is what put stores, or what get expects ("" for a miss).
		value string
		// keyBytes and capacity are put's keyBytes and the capacity of its
		// value (its length when 0).
		keyBytes, capacity int
	}
	put := func(key int, version int64, v string) op { return op{do: "put", key: key, version: version, value: v} }
	get := func(key int, version int64, v string) op { return op{do: "get", key: key, version: version, value: v} }
	drop := func(key int) op { return op{do: "drop", key: key} }
	charge := charge[int]
	// Three entries of a two-byte value fit in a shard of three; a fourth
	// does not.
	three := 3*charge(0, 2) + 1
	// A value of bigCap costs two entries of a two-byte value.
	bigCap := int(charge(0, 2)) + 2

	for _, tc := range []struct {
		name string
		// shardBytes is each shard's budget; 1 MiB when 0.
		shardBytes int64
		ops        []op
		entries    int
		bytes      int64
	}{
		{name: "empty", ops: []op{get(0, 1, "")}},
		{
			name:    "hit only at its version",
			ops:     []op{put(0, 1, "a"), get(0, 1, "a"), get(0, 2, ""), get(0, 0, ""), get(1, 1, "")},
			entries: 1, bytes: charge(0, 1),
		},
		{
			name:    "a new version replaces the old",
			ops:     []op{put(0, 1, "old"), put(0, 2, "newer"), get(0, 2, "newer"), get(0, 1, "")},
			entries: 1, bytes: charge(0, 5),
		},
		{
			name:    "an older version replaces a newer one too",
			ops:     []op{put(0, 2, "new"), put(0, 1, "old"), get(0, 1, "old"), get(0, 2, "")},
			entries: 1, bytes: charge(0, 3),
		},
		{
			name:    "drop forgets the key at any version",
			ops:     []op{put(0, 1, "a"), put(1, 1, "b"), drop(0), get(0, 1, ""), get(1, 1, "b")},
			entries: 1, bytes: charge(0, 1),
		},
		{name: "drop of an absent key", ops: []op{drop(0), put(1, 1, "b"), drop(0)}, entries: 1, bytes: charge(0, 1)},
		{
			name:    "key bytes and the value's capacity are charged",
			ops:     []op{{do: "put", key: 0, version: 1, value: "ab", keyBytes: 7, capacity: 100}, get(0, 1, "ab")},
			entries: 1, bytes: charge(7, 100),
		},
		{
			name:       "eviction takes the oldest put first",
			shardBytes: three,
			ops:        []op{put(0, 1, "v0"), put(1, 1, "v1"), put(2, 1, "v2"), put(3, 1, "v3"), get(0, 1, ""), get(1, 1, "v1"), get(3, 1, "v3")},
			entries:    3, bytes: 3 * charge(0, 2),
		},
		{
			name:       "a get makes an entry the most recently used",
			shardBytes: three,
			ops: []op{
				put(0, 1, "v0"), put(1, 1, "v1"), put(2, 1, "v2"), get(0, 1, "v0"), put(3, 1, "v3"),
				get(1, 1, ""), get(0, 1, "v0"), get(2, 1, "v2"), get(3, 1, "v3"),
			},
			entries: 3, bytes: 3 * charge(0, 2),
		},
		{
			name:       "a replacement is the most recently used",
			shardBytes: three,
			ops: []op{
				put(0, 1, "v0"), put(1, 1, "v1"), put(2, 1, "v2"), put(0, 2, "w0"), put(3, 1, "v3"),
				get(1, 1, ""), get(0, 2, "w0"), get(2, 1, "v2"),
			},
			entries: 3, bytes: 3 * charge(0, 2),
		},
		{
			name:       "a miss at another version does not refresh",
			shardBytes: three,
			ops: []op{
				put(0, 1, "v0"), put(1, 1, "v1"), put(2, 1, "v2"), get(0, 2, ""), put(3, 1, "v3"),
				get(0, 1, ""), get(1, 1, "v1"),
			},
			entries: 3, bytes: 3 * charge(0, 2),
		},
		{
			name:       "a large value evicts several",
			shardBytes: three,
			ops: []op{
				put(0, 1, "v0"), put(1, 1, "v1"), put(2, 1, "v2"),
				{do: "put", key: 3, version: 1, value: "big", capacity: bigCap},
				get(0, 1, ""), get(1, 1, ""), get(2, 1, "v2"), get(3, 1, "big"),
			},
			entries: 2, bytes: charge(0, 2) + charge(0, bigCap),
		},
		{
			name:       "a value of exactly a shard's budget is cached",
			shardBytes: charge(3, 10),
			ops:        []op{put(0, 1, "v0"), {do: "put", key: 1, version: 1, value: "fits", keyBytes: 3, capacity: 10}, get(0, 1, ""), get(1, 1, "fits")},
			entries:    1, bytes: charge(3, 10),
		},
		{
			name:       "a value bigger than a shard's budget is not",
			shardBytes: charge(3, 10),
			ops:        []op{put(0, 1, "v0"), {do: "put", key: 1, version: 1, value: "too big", keyBytes: 4, capacity: 10}, get(0, 1, "v0"), get(1, 1, "")},
			entries:    1, bytes: charge(0, 2),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shardBytes := tc.shardBytes
			if shardBytes == 0 {
				shardBytes = 1 << 20
			}
			c := New[int](shards * shardBytes)
			keys := sameShardKeys(c, 4)
			for i, o := range tc.ops {
				k := keys[o.key]
				switch o.do {
				case "put":
					v := value(o.value)
					if o.capacity > 0 {
						v = append(make([]byte, 0, o.capacity), o.value...)
					}
					c.Put(k, o.version, v, o.keyBytes)
				case "get":
					if got := c.Get(k, o.version); string(got) != o.value || (got == nil) != (o.value == "") {
						t.Errorf("op %d: get(%d, %d) = %q, want %q", i, o.key, o.version, got, o.value)
					}
				case "drop":
					c.Drop(k)
				}
			}
			if entries, bytes := c.Stats(); entries != tc.entries || bytes != tc.bytes {
				t.Errorf("Stats() = %d entries, %d bytes; want %d, %d", entries, bytes, tc.entries, tc.bytes)
			}
			checkCache(t, c)
		})
	}
}

// testKey is a key like its users': a tenant's id, both strings.
type testKey struct{ tenant, id string }

// bytes is what Put is told k holds beyond its struct.
func (k testKey) bytes() int { return len(k.tenant) + len(k.id) }

func TestCacheStaysWithinBudget(t *testing.T) {
	const budget = 64 << 10
	c := New[testKey](budget)
	v := bytes.Repeat([]byte("x"), 300)
	for i := range 10000 {
		k := testKey{"p", fmt.Sprint("card-", i)}
		c.Put(k, 1, v, k.bytes())
	}
	checkCache(t, c)
	entries, used := c.Stats()
	perEntry := charge[testKey](len("p")+len("card-0000"), len(v))
	if used > budget || entries == 0 || int64(entries) < budget/perEntry/2 {
		t.Fatalf("%d entries, %d bytes for a budget of %d", entries, used, budget)
	}
	// The newest value is in; the oldest ones were evicted.
	if c.Get(testKey{"p", "card-9999"}, 1) == nil || c.Get(testKey{"p", "card-0"}, 1) != nil {
		t.Fatal("eviction is not least recently used first")
	}
}

// TestDropIf forgets a tenant's entries, every version, and keeps the
// others' and the budget's accounts.
func TestDropIf(t *testing.T) {
	c := New[testKey](1 << 20)
	for i := range 100 {
		for _, tenant := range []string{"acme", "bravo"} {
			k := testKey{tenant, fmt.Sprint("card-", i)}
			c.Put(k, int64(i), []byte("value"), k.bytes())
		}
	}
	if n := c.DropIf(func(k testKey) bool { return k.tenant == "acme" }); n != 100 {
		t.Fatalf("DropIf dropped %d, want 100", n)
	}
	checkCache(t, c)
	if entries, _ := c.Stats(); entries != 100 {
		t.Fatalf("%d entries left, want bravo's 100", entries)
	}
	if c.Get(testKey{"acme", "card-7"}, 7) != nil || c.Get(testKey{"bravo", "card-7"}, 7) == nil {
		t.Fatal("DropIf dropped the wrong tenant's entries")
	}
	var off *Cache[testKey]
	if n := off.DropIf(func(testKey) bool { return true }); n != 0 {
		t.Fatalf("a nil cache dropped %d", n)
	}
}

// TestNilCache: a cache turned off (a budget that is not positive) is nil,
// and a nil cache holds nothing without failing.
func TestNilCache(t *testing.T) {
	for _, maxBytes := range []int64{0, -1, math.MinInt64} {
		t.Run(fmt.Sprint(maxBytes), func(t *testing.T) {
			c := New[testKey](maxBytes)
			if c != nil {
				t.Fatal("New returned a cache")
			}
			k := testKey{"p", "a"}
			c.Put(k, 1, []byte("a"), k.bytes())
			if got := c.Get(k, 1); got != nil {
				t.Fatalf("Get = %q", got)
			}
			c.SetStamp(k, 1, 7)
			if v, _, _ := c.Peek(k); v != nil {
				t.Fatalf("Peek = %q", v)
			}
			c.Drop(k)
			if entries, bytes := c.Stats(); entries != 0 || bytes != 0 {
				t.Fatalf("Stats() = %d, %d", entries, bytes)
			}
		})
	}
}

// Peek finds a key at any version with the stamp SetStamp left on that
// version; a new version starts unstamped.
func TestPeekAndStamps(t *testing.T) {
	c := New[testKey](1 << 20)
	k := testKey{"p", "a"}
	if v, _, _ := c.Peek(k); v != nil {
		t.Fatalf("Peek of an absent key = %q", v)
	}
	c.Put(k, 1, []byte("one"), k.bytes())
	c.SetStamp(k, 2, 9) // another version: ignored
	if v, version, stamp := c.Peek(k); string(v) != "one" || version != 1 || stamp != 0 {
		t.Fatalf("Peek = %q, %d, %d; want one, 1, 0", v, version, stamp)
	}
	c.SetStamp(k, 1, 5)
	if _, _, stamp := c.Peek(k); stamp != 5 {
		t.Fatalf("stamp = %d, want 5", stamp)
	}
	c.Put(k, 2, []byte("two"), k.bytes())
	if v, version, stamp := c.Peek(k); string(v) != "two" || version != 2 || stamp != 0 {
		t.Fatalf("after a new version, Peek = %q, %d, %d; want two, 2, 0", v, version, stamp)
	}
	c.Drop(k)
	c.SetStamp(k, 2, 5)
	if v, _, _ := c.Peek(k); v != nil {
		t.Fatalf("SetStamp brought a dropped key back: %q", v)
	}
}

// TestConcurrentUse runs readers, writers, stamps, drops and Stats at once; run it
// with -race. Every hit must be the value put for that key and version.
func TestConcurrentUse(t *testing.T) {
	c := New[testKey](32 << 10)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 5000 {
				n := (i*7 + g) % 300
				k := testKey{fmt.Sprint("p", n%3), fmt.Sprint("c", n)}
				version := int64(n % 2)
				want := fmt.Sprintf("%s/%s@%d", k.tenant, k.id, version)
				if got := c.Get(k, version); got != nil && string(got) != want {
					t.Errorf("%v@%d reads %s", k, version, got)
					return
				}
				// Peek sees whichever version is cached, with its own value.
				if got, v, _ := c.Peek(k); got != nil && string(got) != fmt.Sprintf("%s/%s@%d", k.tenant, k.id, v) && string(got) != "other" {
					t.Errorf("%v peeks %s at version %d", k, got, v)
					return
				}
				c.Put(k, version, []byte(want), k.bytes())
				c.SetStamp(k, version, uint64(i))
				switch i % 100 {
				case 0:
					c.Drop(k)
				case 50:
					// Another version replaces this one; the next Get of
					// this key at version misses rather than reading it.
					c.Put(k, version+2, []byte("other"), k.bytes())
				}
			}
		})
	}
	wg.Go(func() {
		for range 1000 {
			if _, bytes := c.Stats(); bytes > 32<<10 {
				t.Errorf("%d bytes in a budget of %d", bytes, 32<<10)
				return
			}
		}
	})
	wg.Wait()
	checkCache(t, c)
}

// benchKeys returns n keys of one tenant, like the card cache's.
func benchKeys(n int) []testKey {
	keys := make([]testKey, n)
	for i := range keys {
		keys[i] = testKey{"project-1", fmt.Sprint("card-", i)}
	}
	return keys
}

// BenchmarkGet measures hits from many goroutines.
func BenchmarkGet(b *testing.B) {
	c := New[testKey](64 << 20)
	keys := benchKeys(1000)
	for _, k := range keys {
		c.Put(k, 1, make([]byte, 400), k.bytes())
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if c.Get(keys[i%len(keys)], 1) == nil {
				b.Error("miss")
				return
			}
			i++
		}
	})
}

// BenchmarkPut measures puts into a full cache, each evicting another.
func BenchmarkPut(b *testing.B) {
	c := New[testKey](1 << 20)
	keys := benchKeys(10000)
	v := make([]byte, 400)
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		c.Put(k, 1, v, k.bytes())
		i++
	}
}
