package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/sqlc/db"
)

// A reused idempotency key is a retry only if the append is the same:
// payload, type, version and requested parent (as sent). Anything else is
// a conflict that names the original turn, before and after a reopen.
func TestIdempotencyKeyReusedForAnotherAppend(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	base := s.append(ten, turnReq(h.ContextID, 0, []byte("base")))
	orig := turnReq(h.ContextID, 0, []byte("once"))
	orig.IdempotencyKey = []byte("k")
	first := s.append(ten, orig)
	tests := []struct {
		name   string
		change func(r *AppendRequest)
		differ []string // nil: an exact repeat
	}{
		{"exact repeat", func(*AppendRequest) {}, nil},
		{"other payload", func(r *AppendRequest) { *r = *withPayload(r, []byte("twice")) }, []string{"payload"}},
		{"other type", func(r *AppendRequest) { r.TypeID = "test.Other" }, []string{"type_id"}},
		{"other version", func(r *AppendRequest) { r.TypeVersion++ }, []string{"type_version"}},
		// It resolves to the same parent, but was not sent the same way.
		{"explicit parent", func(r *AppendRequest) { r.ParentTurnID = base.TurnID }, []string{"parent_turn_id"}},
		{"all of it", func(r *AppendRequest) {
			*r = *withPayload(r, []byte("x"))
			r.TypeID, r.TypeVersion, r.ParentTurnID = "test.Other", 9, base.TurnID
		}, []string{"payload", "type_id", "type_version", "parent_turn_id"}},
	}
	check := func(t *testing.T, when string) {
		for _, tt := range tests {
			t.Run(when+"/"+tt.name, func(t *testing.T) {
				req := *orig
				tt.change(&req)
				r, err := s.Append(context.Background(), ten, &req)
				if tt.differ == nil {
					if err != nil || r.TurnID != first.TurnID || !r.Replayed {
						t.Fatalf("repeat = %+v, %v; want turn %d replayed", r, err, first.TurnID)
					}
					return
				}
				wantConflict(t, err, first.TurnID, tt.differ)
			})
		}
	}
	check(t, "in memory")
	s.reopen()
	check(t, "after reopen")
	if n := s.countRows("turns"); n != 2 {
		t.Fatalf("turn rows = %d, want 2: a conflicting append stored something", n)
	}
}

func withPayload(r *AppendRequest, payload []byte) *AppendRequest {
	n := turnReq(r.ContextID, r.ParentTurnID, payload)
	n.IdempotencyKey, n.TypeID, n.TypeVersion = r.IdempotencyKey, r.TypeID, r.TypeVersion
	return n
}

func wantConflict(t *testing.T, err error, turn uint64, differ []string) {
	t.Helper()
	var se *fault.Error
	if !errors.As(err, &se) || se.Kind != fault.Conflict {
		t.Fatalf("err = %v, want a conflict", err)
	}
	if se.Details["original_turn_id"] != strconv.FormatUint(turn, 10) || !slices.Equal(se.Details["differs"].([]string), differ) {
		t.Fatalf("details = %v, want original turn %d and differs %v", se.Details, turn, differ)
	}
}

// Two different appends racing with one key: one makes the turn, the
// other hears of it, whether they land in one group or two.
func TestIdempotencyKeyRaceForAnotherAppend(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	type result struct {
		r   AppendResult
		err error
	}
	results := make(chan result, 2)
	for _, p := range []string{"a", "b"} {
		req := turnReq(h.ContextID, 0, []byte(p))
		req.IdempotencyKey = []byte("race")
		go func() {
			r, err := s.Append(context.Background(), ten, req)
			results <- result{r, err}
		}()
	}
	a, b := <-results, <-results
	if (a.err == nil) == (b.err == nil) {
		t.Fatalf("results %+v and %+v: want exactly one turn and one conflict", a, b)
	}
	won, lost := a, b
	if a.err != nil {
		won, lost = b, a
	}
	wantConflict(t, lost.err, won.r.TurnID, []string{"payload"})
}

// The in-memory index holds at most MaxIdempotencyKeys keys; older keys
// of the window are answered from Postgres, repeats and conflicts alike.
func TestIdempotencyIndexIsBounded(t *testing.T) {
	s := newTestStore(t)
	s.maxIdemKeys = 3
	s.reopen()
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	reqs := make([]*AppendRequest, 6)
	first := make([]AppendResult, len(reqs))
	for i := range reqs {
		reqs[i] = turnReq(h.ContextID, 0, payloadN(i))
		reqs[i].IdempotencyKey = []byte("key-" + strconv.Itoa(i))
		first[i] = s.append(ten, reqs[i])
	}
	if n := s.committer.idem.held; n != 3 {
		t.Fatalf("index holds %d keys, want 3", n)
	}
	for i, req := range reqs { // the first three only in Postgres
		if r := s.append(ten, req); r.TurnID != first[i].TurnID || !r.Replayed {
			t.Fatalf("repeat of key %d = %+v, want turn %d", i, r, first[i].TurnID)
		}
	}
	other := *withPayload(reqs[0], []byte("changed"))
	_, err := s.Append(context.Background(), ten, &other)
	wantConflict(t, err, first[0].TurnID, []string{"payload"})
	if n := s.countRows("turns"); n != len(reqs) {
		t.Fatalf("turn rows = %d, want %d", n, len(reqs))
	}
}

// A restart loads only the newest MaxIdempotencyKeys keys of the window,
// reading no more than that from Postgres; a retry of an older key, left
// in Postgres, still gets the original turn and stores nothing.
func TestRestartLoadsOnlyTheNewestIdempotencyKeys(t *testing.T) {
	const bound, n = 5, 20
	s := newTestStore(t)
	s.maxIdemKeys = bound
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	reqs := make([]*AppendRequest, n)
	first := make([]AppendResult, n)
	for i := range reqs { // one group each: every key has its own created_at
		reqs[i] = turnReq(h.ContextID, 0, payloadN(i))
		reqs[i].IdempotencyKey = []byte("restart-" + strconv.Itoa(i))
		first[i] = s.append(ten, reqs[i])
	}
	s.reopen()

	idem := s.committer.idem
	if idem.loadedRows != bound || idem.held != bound {
		t.Fatalf("start-up read %d keys from Postgres and holds %d, want %d and %d", idem.loadedRows, idem.held, bound, bound)
	}
	for i, req := range reqs {
		k := newIdemKey(ten.No, h.ContextID, req.IdempotencyKey)
		_, held := idem.find(&k)
		if want := i >= n-bound; held != want {
			t.Fatalf("key %d held in memory: %v, want %v (the %d newest)", i, held, want, bound)
		}
	}
	// The streamed rows are the generated query's.
	q := s.as(pgrole.Recovery, "")
	arg := db.ListNewestIdempotencyKeysParams{Since: time.Now().Add(-IdempotencyWindow), MaxKeys: bound}
	listed, err := q.ListNewestIdempotencyKeys(context.Background(), arg)
	if err != nil {
		t.Fatal(err)
	}
	var streamed []db.ListNewestIdempotencyKeysRow
	if err := q.ForEachNewestIdempotencyKey(context.Background(), arg, func(r *db.ListNewestIdempotencyKeysRow) error {
		c := *r
		c.IdempotencyKey = bytes.Clone(r.IdempotencyKey) // the driver's memory
		streamed = append(streamed, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(listed) != bound || !reflect.DeepEqual(streamed, listed) {
		t.Fatalf("streamed %+v, listed %+v", streamed, listed)
	}

	before := s.Stats()
	for _, i := range []int{0, n - bound - 1, n - 1} { // oldest, newest left in Postgres, newest
		if r := s.append(ten, reqs[i]); r.TurnID != first[i].TurnID || !r.Replayed || r.Depth != first[i].Depth {
			t.Fatalf("retry of key %d after restart = %+v, want turn %d replayed", i, r, first[i].TurnID)
		}
	}
	other := *withPayload(reqs[0], []byte("changed"))
	_, err = s.Append(context.Background(), ten, &other)
	wantConflict(t, err, first[0].TurnID, []string{"payload"})
	if after := s.Stats(); after.Turns != before.Turns || after.LastTurn != before.LastTurn {
		t.Fatalf("turns %d (last %d) after the retries, want %d (last %d)", after.Turns, after.LastTurn, before.Turns, before.LastTurn)
	}
	if turns, keys := s.countRows("turns"), s.countRows("idempotency_keys"); turns != n || keys != n {
		t.Fatalf("turn rows %d, key rows %d after the retries; want %d each", turns, keys, n)
	}
}

// Keys expire after IdempotencyWindow: the purge deletes them from
// Postgres, and a repeat after the window makes a new turn.
func TestIdempotencyKeysExpireAndArePurged(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	pool := pgtest.NewPool(t)
	e, err := Open(context.Background(), Options{Dir: t.TempDir(), Pool: pool, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	ten, err := e.Tenant(context.Background(), ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.CreateContext(context.Background(), ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	req := turnReq(h.ContextID, 0, []byte("once a day"))
	req.IdempotencyKey = []byte("daily")
	first, err := e.Append(context.Background(), ten, req)
	if err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	mu.Lock()
	clock = clock.Add(IdempotencyWindow - time.Minute)
	mu.Unlock()
	if n, err := e.PurgeIdempotencyKeys(context.Background()); err != nil || n != 0 || count() != 1 {
		t.Fatalf("purge inside the window: %d, %v; %d keys left, want 1", n, err, count())
	}
	if r, err := e.Append(context.Background(), ten, req); err != nil || r.TurnID != first.TurnID {
		t.Fatalf("repeat inside the window: %+v, %v", r, err)
	}
	mu.Lock()
	clock = clock.Add(2 * time.Minute)
	mu.Unlock()
	if n, err := e.PurgeIdempotencyKeys(context.Background()); err != nil || n != 1 || count() != 0 {
		t.Fatalf("purge after the window: %d, %v; %d keys left, want 0", n, err, count())
	}
	r, err := e.Append(context.Background(), ten, req)
	if err != nil || r.TurnID == first.TurnID || r.Replayed {
		t.Fatalf("repeat after the window: %+v, %v; want a new turn", r, err)
	}
}

// idemModel is idemTable's behaviour, plainly: a list of the entries in
// the order added, dead ones included, at most max long.
type idemModel struct {
	list         []*idemModelEntry
	live         map[idemKey]*idemModelEntry
	max          int
	evictedUntil int64
}

type idemModelEntry struct {
	k    idemKey
	e    idemEntry
	dead bool
}

func (m *idemModel) kill(x *idemModelEntry) {
	if !x.dead {
		x.dead = true
		delete(m.live, x.k)
	}
}

func (m *idemModel) add(k idemKey, e idemEntry) {
	if x, ok := m.live[k]; ok {
		m.kill(x)
	}
	if len(m.list) == m.max {
		if x := m.list[0]; !x.dead {
			m.evictedUntil = max(m.evictedUntil, x.e.at.UnixNano())
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
		if x.e.seq >= seq {
			m.kill(x)
		}
	}
	for len(m.list) > 0 && m.list[len(m.list)-1].dead {
		m.list = m.list[:len(m.list)-1]
	}
}

func (m *idemModel) expire(now time.Time) {
	for len(m.list) > 0 && (m.list[0].dead || now.Sub(m.list[0].e.at) >= IdempotencyWindow) {
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
		tab, m := newIdemTable(max), &idemModel{max: max, live: map[idemKey]*idemModelEntry{}}
		homes := make([]uint64, 24) // few homes, anywhere in the index
		for i := range homes {
			homes[i] = rnd.Uint64()
		}
		keys := make([]idemKey, 3*max+5)
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
				e := idemEntry{turn: uint64(op + 1), at: clock, seq: seq, parent: uint64(rnd.IntN(3)), parentKnown: rnd.IntN(8) != 0}
				if !e.parentKnown {
					e.parent = 0
				}
				tab.add(k, e)
				m.add(k, e)
				if rnd.IntN(4) == 0 {
					seq++
				}
			case r < 85:
				s := seq - uint64(rnd.IntN(3))
				tab.forgetFrom(s)
				m.forgetFrom(s)
			case r < 90:
				tab.expire(clock)
				m.expire(clock)
			default:
				clock = clock.Add(time.Duration(rnd.IntN(int(IdempotencyWindow / 50))))
			}
			held := 0
			for _, k := range keys {
				got, ok := tab.lookup(k, clock)
				var want idemEntry
				x, wantOK := m.live[k]
				if wantOK {
					held++
					want = x.e
					wantOK = clock.Sub(want.at) < IdempotencyWindow
				}
				if ok != wantOK || ok && (got.turn != want.turn || !got.at.Equal(want.at) || got.seq != want.seq ||
					got.parent != want.parent || got.parentKnown != want.parentKnown) {
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
		keys := make([]idemKey, tc.rows)
		for i := range keys {
			keys[i] = newIdemKey(1, 7, []byte(strconv.Itoa(i)))
		}
		tab := newIdemTable(tc.max)
		for i := tc.rows - 1; i >= 0; i-- {
			tab.loadOlder(keys[i], idemEntry{turn: uint64(i + 1), at: start.Add(time.Duration(i) * time.Second), parent: uint64(i), parentKnown: true})
		}
		tab.loaded()
		if tab.held != tc.rows || tab.loadedRows != tc.rows {
			t.Fatalf("%+v: held %d, loaded %d", tc, tab.held, tab.loadedRows)
		}
		if got, want := tab.mayMiss(start), tc.rows == tc.max; got != want {
			t.Fatalf("%+v: may miss keys since the oldest: %v, want %v", tc, got, want)
		}
		if tab.mayMiss(start.Add(time.Second)) {
			t.Fatalf("%+v: may miss keys newer than the oldest held", tc)
		}
		now := start.Add(time.Hour)
		for i, k := range keys {
			if e, ok := tab.lookup(k, now); !ok || e.turn != uint64(i+1) || e.parent != uint64(i) || !e.parentKnown {
				t.Fatalf("%+v: key %d = %+v, %v", tc, i, e, ok)
			}
		}
		// The oldest leave first; one more key evicts the oldest when full.
		tab.add(newIdemKey(1, 7, []byte("new")), idemEntry{turn: 1 << 20, at: now})
		_, ok := tab.lookup(keys[0], now)
		if want := tc.rows < tc.max; ok != want {
			t.Fatalf("%+v: oldest key held after one more: %v, want %v", tc, ok, want)
		}
		tab.expire(start.Add(IdempotencyWindow + time.Duration(tc.rows-2)*time.Second))
		if tab.held != 2 {
			t.Fatalf("%+v: %d keys held after expiry, want 2", tc, tab.held)
		}
	}
}
