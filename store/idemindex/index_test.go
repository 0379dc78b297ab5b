package idemindex

import (
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// idemModel is Table's behaviour, plainly: a list of the entries in
// the order added, dead ones included, at most max long.
type idemModel struct {
	list         []*idemModelEntry
	live         map[Key]*idemModelEntry
	max          int
	evictedUntil int64
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
	if len(m.list) == m.max {
		if x := m.list[0]; !x.dead {
			m.evictedUntil = max(m.evictedUntil, x.e.At.UnixNano())
			m.kill(x)
		}
		m.list = m.list[1:]
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
}

func (m *idemModel) expire(now time.Time) {
	for len(m.list) > 0 && (m.list[0].dead || now.Sub(m.list[0].e.At) >= Window) {
		m.kill(m.list[0])
		m.list = m.list[1:]
	}
}

// The idempotency table (a ring and an open-addressing index) holds what
// a plain list of its entries would, through adds of new and reused keys,
// evictions for the cap, rollbacks and expiry; keys share index homes a
// lot, so that runs of the index form, move and close.
func TestIdemTableMatchesAPlainList(t *testing.T) {
	for seed := range uint64(10) {
		rnd := rand.New(rand.NewPCG(seed, 0))
		max := 1 + rnd.IntN(200)
		tab, m := New(max), &idemModel{max: max, live: map[Key]*idemModelEntry{}}
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
			held := 0
			for _, k := range keys {
				got, ok := tab.Lookup(k, clock)
				var want Entry
				x, wantOK := m.live[k]
				if wantOK {
					held++
					want = x.e
					wantOK = clock.Sub(want.At) < Window
				}
				if ok != wantOK || ok && (got.Turn != want.Turn || !got.At.Equal(want.At) || got.Seq != want.Seq ||
					got.Parent != want.Parent || got.ParentKnown != want.ParentKnown) {
					t.Fatalf("seed %d, op %d: lookup = %+v, %v; want %+v, %v", seed, op, got, ok, want, wantOK)
				}
			}
			if tab.held != held || tab.evictedUntil.Load() != m.evictedUntil || tab.next-tab.first != uint64(len(m.list)) {
				t.Fatalf("seed %d, op %d: held %d, evicted until %d, %d slots; want %d, %d, %d",
					seed, op, tab.held, tab.evictedUntil.Load(), tab.next-tab.first, held, m.evictedUntil, len(m.list))
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
		tab.Loaded()
		if tab.held != tc.rows || tab.loadedRows != tc.rows {
			t.Fatalf("%+v: held %d, loaded %d", tc, tab.held, tab.loadedRows)
		}
		if got, want := tab.MayMiss(start), tc.rows == tc.max; got != want {
			t.Fatalf("%+v: may miss keys since the oldest: %v, want %v", tc, got, want)
		}
		if tab.MayMiss(start.Add(time.Second)) {
			t.Fatalf("%+v: may miss keys newer than the oldest held", tc)
		}
		now := start.Add(time.Hour)
		for i, k := range keys {
			if e, ok := tab.Lookup(k, now); !ok || e.Turn != uint64(i+1) || e.Parent != uint64(i) || !e.ParentKnown {
				t.Fatalf("%+v: key %d = %+v, %v", tc, i, e, ok)
			}
		}
		// The oldest leave first; one more key evicts the oldest when full.
		tab.Add(NewKey(1, 7, []byte("new")), Entry{Turn: 1 << 20, At: now})
		_, ok := tab.Lookup(keys[0], now)
		if want := tc.rows < tc.max; ok != want {
			t.Fatalf("%+v: oldest key held after one more: %v, want %v", tc, ok, want)
		}
		tab.Expire(start.Add(Window + time.Duration(tc.rows-2)*time.Second))
		if tab.held != 2 {
			t.Fatalf("%+v: %d keys held after expiry, want 2", tc, tab.held)
		}
	}
}
