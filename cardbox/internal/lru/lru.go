// Package lru is a map that keeps the values most recently used up to a
// total weight, letting go of the least recently used beyond it. Its
// lock is held for a map lookup or a list move only.
package lru

import (
	"container/list"
	"sync"
)

// Cache maps keys to values of a weight each, up to a total weight. A nil
// *Cache holds nothing.
type Cache[K comparable, V comparable] struct {
	weight func(V) int
	max    int

	mu     sync.Mutex
	total  int                 // the weight of the values held
	items  map[K]*list.Element // values are *item[K, V]
	recent list.List           // most recently used first
}

type item[K comparable, V comparable] struct {
	key K
	v   V
}

// New returns a cache for values of weight (each not negative) up to max
// in all, or nil (which holds nothing) when max is not positive.
func New[K comparable, V comparable](max int, weight func(V) int) *Cache[K, V] {
	if max <= 0 {
		return nil
	}
	return &Cache[K, V]{weight: weight, max: max, items: map[K]*list.Element{}}
}

// Get returns the value of key and whether there is one.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	var none V
	if c == nil {
		return none, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return none, false
	}
	c.recent.MoveToFront(e)
	return e.Value.(*item[K, V]).v, true
}

// Put keeps v as key's value, in place of any other, and lets go of the
// least recently used values beyond the bound. A value heavier than the
// whole bound is not kept.
func (c *Cache[K, V]) Put(key K, v V) {
	if c == nil || c.weight(v) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.remove(e)
	}
	c.items[key] = c.recent.PushFront(&item[K, V]{key: key, v: v})
	c.total += c.weight(v)
	for c.total > c.max {
		c.remove(c.recent.Back())
	}
}

// Drop forgets key's value if it is still v (a newer one put since
// stays).
func (c *Cache[K, V]) Drop(key K, v V) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok && e.Value.(*item[K, V]).v == v {
		c.remove(e)
	}
}

func (c *Cache[K, V]) remove(e *list.Element) {
	it := c.recent.Remove(e).(*item[K, V])
	delete(c.items, it.key)
	c.total -= c.weight(it.v)
}
