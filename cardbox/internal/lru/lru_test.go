package lru

import "testing"

type value struct{ weight int }

func weight(v *value) int { return v.weight }

func TestCacheKeepsTheMostRecentlyUsedWithinItsWeight(t *testing.T) {
	c := New[string](10, weight)
	a, b, d := &value{4}, &value{4}, &value{4}
	c.Put("a", a)
	c.Put("b", b)
	if got, ok := c.Get("a"); !ok || got != a { // a is now the most recent
		t.Fatalf("Get(a) = %v, %v", got, ok)
	}
	c.Put("d", d) // 12 > 10: b, the least recently used, goes
	if _, ok := c.Get("b"); ok {
		t.Fatal("b kept beyond the bound")
	}
	for k, want := range map[string]*value{"a": a, "d": d} {
		if got, ok := c.Get(k); !ok || got != want {
			t.Fatalf("Get(%s) = %v, %v", k, got, ok)
		}
	}
	c.Put("huge", &value{11})
	if _, ok := c.Get("huge"); ok {
		t.Fatal("a value heavier than the bound was kept")
	}
	c.Drop("a", &value{4}) // another value: a stays
	if _, ok := c.Get("a"); !ok {
		t.Fatal("Drop of another value removed a")
	}
	c.Drop("a", a)
	if _, ok := c.Get("a"); ok {
		t.Fatal("Drop kept a")
	}
	if c.total != d.weight {
		t.Fatalf("total weight %d, want %d", c.total, d.weight)
	}
}

func TestNilCacheHoldsNothing(t *testing.T) {
	c := New[string](0, weight)
	if c != nil {
		t.Fatal("a cache of no weight is not nil")
	}
	c.Put("a", &value{1})
	c.Drop("a", nil)
	if _, ok := c.Get("a"); ok {
		t.Fatal("a nil cache held a value")
	}
}
