package cardbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// checkCache verifies a cache's accounting: each shard's bytes are the sum
// of its entries' sizes, within its limit, and its list holds exactly the
// entries of its map.
func checkCache(t *testing.T, c *cardCache) {
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

// sameShardKeys returns n card ids of project that fall in one shard.
func sameShardKeys(c *cardCache, project string, n int) []string {
	want := c.shard(cacheKey{project, "k0"})
	ids := []string{"k0"}
	for i := 1; len(ids) < n; i++ {
		id := fmt.Sprint("k", i)
		if c.shard(cacheKey{project, id}) == want {
			ids = append(ids, id)
		}
	}
	return ids
}

func TestCardCacheStaysWithinBudget(t *testing.T) {
	const budget = 64 << 10
	c := newCardCache(budget)
	card := bytes.Repeat([]byte("x"), 300)
	for i := range 10000 {
		c.put("p", fmt.Sprint("card-", i), 1, card)
	}
	checkCache(t, c)
	entries, used := c.stats()
	perEntry := int64(len("p")+len("card-0000")+len(card)) + entryOverhead
	if used > budget || entries == 0 || int64(entries) < budget/perEntry/2 {
		t.Fatalf("%d entries, %d bytes for a budget of %d", entries, used, budget)
	}
	// The newest card is in; the oldest ones were evicted.
	if c.get("p", "card-9999", 1) == nil || c.get("p", "card-0", 1) != nil {
		t.Fatal("eviction is not least recently used first")
	}
	// A card larger than a shard's budget is not cached at all.
	c.put("p", "huge", 1, make([]byte, budget/cacheShards))
	if c.get("p", "huge", 1) != nil {
		t.Fatal("cached a card larger than a shard")
	}
	checkCache(t, c)
}

func TestCardCacheEvictsLeastRecentlyUsed(t *testing.T) {
	card := bytes.Repeat([]byte("x"), 100)
	size := int64(len("p")+len("k0")+len(card)) + entryOverhead
	c := newCardCache(cacheShards * (3*size + size/2)) // three cards per shard
	ids := sameShardKeys(c, "p", 4)
	for _, id := range ids[:3] {
		c.put("p", id, 1, card)
	}
	c.get("p", ids[0], 1) // ids[1] is now the least recently used
	c.put("p", ids[3], 1, card)
	for i, want := range []bool{true, false, true, true} {
		if got := c.get("p", ids[i], 1) != nil; got != want {
			t.Errorf("%s cached: %v, want %v", ids[i], got, want)
		}
	}
	checkCache(t, c)
}

func TestCardCacheVersionsAndProjects(t *testing.T) {
	c := newCardCache(1 << 20)
	c.put("p1", "a", 10, []byte(`"p1 a v10"`))
	c.put("p2", "a", 10, []byte(`"p2 a v10"`))
	if got := c.get("p1", "a", 11); got != nil {
		t.Fatalf("another version hit: %s", got)
	}
	if got := c.get("p2", "a", 10); string(got) != `"p2 a v10"` {
		t.Fatalf("p2 reads %s", got)
	}
	if got := c.get("p3", "a", 10); got != nil {
		t.Fatalf("p3 reads %s", got)
	}
	// A new version replaces the old one.
	c.put("p1", "a", 11, []byte(`"p1 a v11, longer"`))
	if got := c.get("p1", "a", 11); string(got) != `"p1 a v11, longer"` || c.get("p1", "a", 10) != nil {
		t.Fatalf("after replace: %s", got)
	}
	c.drop("p1", "a")
	if c.get("p1", "a", 11) != nil {
		t.Fatal("dropped card still cached")
	}
	if entries, _ := c.stats(); entries != 1 {
		t.Fatalf("%d entries, want 1", entries)
	}
	checkCache(t, c)
}

func TestCardCacheConcurrentUse(t *testing.T) {
	c := newCardCache(32 << 10)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 5000 {
				id := fmt.Sprint("c", (i*7+g)%300)
				want := fmt.Sprintf("%q", id)
				if got := c.get("p", id, 1); got != nil && string(got) != want {
					t.Errorf("%s reads %s", id, got)
					return
				}
				c.put("p", id, 1, []byte(want))
				if i%100 == 0 {
					c.drop("p", id)
				}
			}
		})
	}
	wg.Wait()
	checkCache(t, c)
}

// TestServiceCacheBound reads more cards than the cache holds: every
// answer is right and the cache stays within its budget.
func TestServiceCacheBound(t *testing.T) {
	ctx := context.Background()
	const budget = 32 << 10
	s := New(pgtest.Tx(t), Options{CardCacheBytes: budget})
	var ids []string
	for batch := range 5 {
		cards := make([]NewCard, MaxAddCards)
		for i := range cards {
			id := fmt.Sprintf("card-%d-%d", batch, i)
			ids = append(ids, id)
			cards[i] = NewCard{
				CardID: id, Content: json.RawMessage(fmt.Sprintf("%q", id)),
				Metadata: json.RawMessage(`{"type":"agent.thought"}`),
			}
		}
		if _, err := s.AddCards(ctx, "p1", cards); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		for start := 0; start < len(ids); start += MaxBatchIDs {
			res, err := s.GetCardsJSON(ctx, "p1", ids[start:start+MaxBatchIDs])
			if err != nil {
				t.Fatal(err)
			}
			for i, raw := range res.Cards {
				var got struct {
					CardID  string `json:"card_id"`
					Content string `json:"content"`
				}
				if err := json.Unmarshal(raw, &got); err != nil || got.CardID != ids[start+i] || got.Content != got.CardID {
					t.Fatalf("round %d: card %d is %s (%v)", round, start+i, raw, err)
				}
			}
		}
		entries, used := s.cache.stats()
		if used > budget || entries == 0 || entries >= len(ids) {
			t.Fatalf("round %d: %d entries, %d bytes for a budget of %d", round, entries, used, budget)
		}
	}
	checkCache(t, s.cache)
}

// TestCacheOff: with a negative budget the JSON reads read every card.
func TestCacheOff(t *testing.T) {
	ctx := context.Background()
	s := New(pgtest.Tx(t), Options{CardCacheBytes: -1, Now: func() time.Time { return time.Unix(1e9, 0) }})
	if s.cache != nil {
		t.Fatal("cache on")
	}
	if _, err := s.AddCard(ctx, "p1", NewCard{CardID: "a", Metadata: json.RawMessage(`{"type":"agent.thought"}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := s.GetCardsJSON(ctx, "p1", []string{"a", "b"})
	if err != nil || len(res.Cards) != 1 || len(res.MissingIDs) != 1 {
		t.Fatalf("res = %+v, %v", res, err)
	}
}
