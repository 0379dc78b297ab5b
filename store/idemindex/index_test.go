package idemindex

import (
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// idemModel is Table's behaviour, plainly: a list of the entries in
// the order added, dead ones included, at most max+slack long, the first
// forgotten of them forgotten for the cap.
type idemModel struct {
	list         []*idemModelEntry
	live         map[Key]*idemModelEntry
	max, slack   int
	forgotten    int
	evictedUntil int64
	evicted      map[Key]int64 // keys forgotten for the cap: the newest at of each
}

type idemModelEntry struct {
	k    Key
	e    Entry
	dead bool
}

func (m *idemModel) kill(x *idemModelEntry) {
	if !x.dead {
		x.dead = true
		delete(m.live, x.k)
	}
}

func (m *idemModel) add(k Key, e Entry) {
	if x, ok := m.live[k]; ok {
		m.kill(x)
	}
	if len(m.list)-m.forgotten == m.max {
		if x := m.list[m.forgotten]; !x.dead {
			m.evictedUntil = max(m.evictedUntil, x.e.At.UnixNano())
			m.evicted[x.k] = max(m.evicted[x.k], x.e.At.UnixNano())
		}
		m.forgotten++
	}
	if len(m.list) == m.max+m.slack {
		m.kill(m.list[0])
		m.list = m.list[1:]
		m.forgotten--
	}
	x := &idemModelEntry{k: k, e: e}
	m.list = append(m.list, x)
	m.live[k] = x
}

func (m *idemModel) forgetFrom(seq uint64) {
	for _, x := range m.list {
		if x.e.Seq >= seq {
			m.kill(x)
		}
	}
	for len(m.list) > 0 && m.list[len(m.list)-1].dead {
		m.list = m.list[:len(m.list)-1]
	}
	m.forgotten = min(m.forgotten, len(m.list))
}

// held is how many keys are held for the cap.
func (m *idemModel) held() int {
	n := 0
	for _, x := range m.list[m.forgotten:] {
		if !x.dead {
			n++
		}
	}
	return n
}

func (m *idemModel) expire(now time.Time) {
	for len(m.list) > 0 && (m.list[0].dead || now.Sub(m.list[0].e.At) >= Window) {
		m.kill(m.list[0])
		m.list = m.list[1:]
		m.forgotten = max(m.forgotten-1, 0)
	}
}

// The idempotency table (a ring and an open-addressing index) holds what
// a plain list of its entries would, through adds of new and reused keys,
// evictions for the cap, rollbacks and expiry; keys share index homes a
// lot, so that runs of the index form, move and close.
func TestIdemTableMatchesAPlainList(t *testing.T) {
	for seed := range uint64(10) {
		rnd := rand.New(rand.NewPCG(seed, 0))
		max, slack := 1+rnd.IntN(200), 1+rnd.IntN(50)
		tab, m := newTable(max, slack), &idemModel{max: max, slack: slack, live: map[Key]*idemModelEntry{}, evicted: map[Key]int64{}}
		homes := make([]uint64, 24) // few homes, anywhere in the index
		for i := range homes {
			homes[i] = rnd.Uint64()
		}
		keys := make([]Key, 3*max+5)
		for i := range keys {
			binary.LittleEndian.PutUint64(keys[i][:8], homes[rnd.IntN(len(homes))])
			binary.LittleEndian.PutUint64(keys[i][8:], uint64(i))
		}
		clock := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
		seq := uint64(1)
		for op := range 2000 {
			switch r := rnd.IntN(100); {
			case r < 80:
				k := keys[rnd.IntN(len(keys))]
				e := Entry{Turn: uint64(op + 1), At: clock, Seq: seq, Parent: uint64(rnd.IntN(3)), ParentKnown: rnd.IntN(8) != 0}
				if !e.ParentKnown {
					e.Parent = 0
				}
				tab.Add(k, e)
				m.add(k, e)
				if rnd.IntN(4) == 0 {
					seq++
				}
			case r < 85:
				s := seq - uint64(rnd.IntN(3))
				tab.ForgetFrom(s)
				m.forgetFrom(s)
			case r < 90:
				tab.Expire(clock)
				m.expire(clock)
			default:
				clock = clock.Add(time.Duration(rnd.IntN(int(Window / 50))))
			}
			since := clock.Add(-Window)
			for _, k := range keys {
				// A key forgotten for the cap in the window is never
				// taken for one memory holds all of.
				if at, ok := m.evicted[k]; ok && at > since.UnixNano() && !tab.MayMiss(k, since) {
					t.Fatalf("seed %d, op %d: key forgotten at %d, since %d: not reported as maybe missing", seed, op, at, since.UnixNano())
				}
				got, ok := tab.Lookup(k, clock)
				var want Entry
				x, wantOK := m.live[k]
				if wantOK {
					want = x.e
					wantOK = clock.Sub(want.At) < Window
				}
				if ok != wantOK || ok && (got.Turn != want.Turn || !got.At.Equal(want.At) || got.Seq != want.Seq ||
					got.Parent != want.Parent || got.ParentKnown != want.ParentKnown) {
					t.Fatalf("seed %d, op %d: lookup = %+v, %v; want %+v, %v", seed, op, got, ok, want, wantOK)
				}
			}
			if tab.Len() != m.held() || tab.held != len(m.live) || tab.evictedUntil.Load() > m.evictedUntil ||
				tab.next-tab.first != uint64(len(m.list)) || tab.next-tab.held0 != uint64(len(m.list)-m.forgotten) {
				t.Fatalf("seed %d, op %d: held %d (%d live), evicted until %d, %d slots, %d for the cap; want %d (%d), at most %d, %d, %d",
					seed, op, tab.Len(), tab.held, tab.evictedUntil.Load(), tab.next-tab.first, tab.next-tab.held0,
					m.held(), len(m.live), m.evictedUntil, len(m.list), len(m.list)-m.forgotten)
			}
		}
	}
}

// The start-up load, newest first, holds what adding the same keys oldest
// first would; at the cap, memory may miss keys up to the oldest held.
func TestIdemTableLoadNewestFirst(t *testing.T) {
	for _, tc := range []struct{ max, rows int }{{5, 3}, {5, 5}, {100, 99}, {100, 100}, {1000, 1000}} {
		start := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
		keys := make([]Key, tc.rows)
		for i := range keys {
			keys[i] = NewKey(1, 7, []byte(strconv.Itoa(i)))
		}
		tab := New(tc.max)
		for i := tc.rows - 1; i >= 0; i-- {
			tab.LoadOlder(keys[i], Entry{Turn: uint64(i + 1), At: start.Add(time.Duration(i) * time.Second), Parent: uint64(i), ParentKnown: true})
		}
		tab.Loaded(false)
		if tab.held != tc.rows || tab.loadedRows != tc.rows {
			t.Fatalf("%+v: held %d, loaded %d", tc, tab.held, tab.loadedRows)
		}
		other := NewKey(1, 7, []byte("other"))
		if got, want := tab.MayMiss(other, start), tc.rows == tc.max; got != want {
			t.Fatalf("%+v: may miss keys since the oldest: %v, want %v", tc, got, want)
		}
		if tab.MayMiss(other, start.Add(time.Second)) {
			t.Fatalf("%+v: may miss keys newer than the oldest held", tc)
		}
		now := start.Add(time.Hour)
		for i, k := range keys {
			if e, ok := tab.Lookup(k, now); !ok || e.Turn != uint64(i+1) || e.Parent != uint64(i) || !e.ParentKnown {
				t.Fatalf("%+v: key %d = %+v, %v", tc, i, e, ok)
			}
		}
		// The oldest leave first; one more key forgets the oldest when
		// full (its entry stays for the slack).
		tab.Add(NewKey(1, 7, []byte("new")), Entry{Turn: 1 << 20, At: now})
		if got, want := tab.Len(), min(tc.rows+1, tc.max); got != want {
			t.Fatalf("%+v: %d keys held after one more, want %d", tc, got, want)
		}
		if got, want := tab.MayMiss(keys[0], start.Add(-time.Second)), tc.rows == tc.max; got != want {
			t.Fatalf("%+v: oldest key may be missing after one more: %v, want %v", tc, got, want)
		}
		tab.Expire(start.Add(Window + time.Duration(tc.rows-2)*time.Second))
		if tab.held != 2 {
			t.Fatalf("%+v: %d keys held after expiry, want 2", tc, tab.held)
		}
	}
}

// Past its cap, a table still tells the keys it forgot (every one) from
// keys never used (all but a few): only the former need Postgres. Beyond
// the filter's bound, every key as old as the dropped segment's may be
// missing; out of the window, the filter forgets.
func TestIdemTableRemembersForgottenKeys(t *testing.T) {
	const max = 1000
	start := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	tab := New(max)
	segKeys := tab.evicted.segKeys
	key := func(i int) Key { return NewKey(1, 7, []byte("used-"+strconv.Itoa(i))) }
	at := func(i int) time.Time { return start.Add(time.Duration(i) * time.Millisecond) }
	added := 0
	for _, tc := range []struct {
		name    string
		keys    int // added so far, one a millisecond
		dropped bool
	}{
		{"below the cap", max, false},
		{"past the cap", max + 10*segKeys, false},
		{"past the filter's bound", max + (maxEvictedSegments+2)*segKeys, true},
	} {
		for ; added < tc.keys; added++ {
			tab.Add(key(added), Entry{Turn: uint64(added + 1), At: at(added), Seq: uint64(added + 1)})
		}
		now := at(tc.keys)
		since := now.Add(-Window)
		forgotten := tc.keys - max
		for i := range forgotten {
			if !tab.MayMiss(key(i), since) {
				t.Fatalf("%s: key %d, forgotten for the cap, not reported as maybe missing", tc.name, i)
			}
		}
		for i := forgotten; i < tc.keys; i++ {
			if e, ok := tab.Lookup(key(i), now); !ok || e.Turn != uint64(i+1) {
				t.Fatalf("%s: key %d held = %+v, %v", tc.name, i, e, ok)
			}
		}
		const fresh = 100_000
		mistaken := 0
		for i := range fresh {
			if tab.MayMiss(NewKey(1, 7, []byte("fresh-"+strconv.Itoa(i))), since) {
				mistaken++
			}
		}
		if tc.dropped {
			if mistaken != fresh {
				t.Fatalf("%s: %d of %d keys never used may be missing, want all (a segment was dropped)", tc.name, mistaken, fresh)
			}
			if got := tab.evicted.segments(); got != maxEvictedSegments {
				t.Fatalf("%s: %d segments, want %d", tc.name, got, maxEvictedSegments)
			}
			// Once the dropped segment's keys are out of the window, the
			// others are told apart again.
			after := time.Unix(0, tab.evictedUntil.Load()+1)
			mistaken = 0
			for i := range fresh {
				if tab.MayMiss(NewKey(1, 7, []byte("fresh-"+strconv.Itoa(i))), after) {
					mistaken++
				}
			}
			if mistaken > fresh/50 {
				t.Fatalf("%s: %d of %d keys never used may be missing after the dropped segment, want under 2 %%", tc.name, mistaken, fresh)
			}
			continue
		}
		if mistaken > fresh/100 {
			t.Fatalf("%s: %d of %d keys never used may be missing, want under 1 %%", tc.name, mistaken, fresh)
		}
		t.Logf("%s: %d of %d keys never used may be missing", tc.name, mistaken, fresh)
	}
	// A key held at a mark is found for the slack's keys after it, and
	// then the mark is stale.
	mark, held := tab.Mark(), added-max
	for range Slack(max) {
		tab.Add(key(added), Entry{Turn: uint64(added + 1), At: at(added)})
		added++
	}
	if e, ok := tab.Lookup(key(held), at(added)); !ok || e.Turn != uint64(held+1) || tab.Stale(mark) {
		t.Fatalf("key held at the mark, the slack later: %+v, %v; stale %v", e, ok, tab.Stale(mark))
	}
	tab.Add(key(added), Entry{Turn: uint64(added + 1), At: at(added)})
	added++
	if !tab.Stale(mark) {
		t.Fatal("a mark more than the slack ago is not stale")
	}
	// Out of the window, the filter forgets its segments.
	later := at(added).Add(2 * Window)
	tab.Expire(later)
	if got := tab.evicted.segments(); got != 0 {
		t.Fatalf("%d segments after the window, want 0", got)
	}
	if tab.MayMiss(key(0), later.Add(-Window)) {
		t.Fatal("a key forgotten a window ago still may be missing")
	}
}
