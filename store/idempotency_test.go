package store

import (
	"bytes"
	"context"
	"errors"
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
	"github.com/cardboxhq/cardbox/store/idemindex"
	"github.com/cardboxhq/cardbox/store/internal/groupcommit"
	"github.com/cardboxhq/cardbox/store/internal/storedb"
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
		t.Helper()
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
	if n := s.idem.Len(); n != 3 {
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

// Past the cap, only the keys memory forgot ask Postgres: new keys (all
// but the filter's rare mistakes, none with these keys) are answered from
// memory, and retries of forgotten keys ask and get their turns.
func TestIdempotencyNewKeysPastTheCapAskNobody(t *testing.T) {
	const bound, n = 3, 40
	s := newTestStore(t)
	s.maxIdemKeys = bound
	s.reopen()
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	reqs := make([]*AppendRequest, n)
	first := make([]AppendResult, n)
	for i := range reqs {
		reqs[i] = turnReq(h.ContextID, 0, payloadN(i))
		reqs[i].IdempotencyKey = []byte("past-the-cap-" + strconv.Itoa(i))
		first[i] = s.append(ten, reqs[i])
		if r := first[i]; r.Replayed {
			t.Fatalf("new key %d = %+v, replayed", i, r)
		}
	}
	if asked := s.keyLookups.asked.Load(); asked != 0 {
		t.Fatalf("%d new keys past the cap asked Postgres %d times, want 0", n, asked)
	}
	for i, req := range reqs { // the first n-bound only in Postgres
		if r := s.append(ten, req); r.TurnID != first[i].TurnID || !r.Replayed {
			t.Fatalf("retry of key %d = %+v, want turn %d replayed", i, r, first[i].TurnID)
		}
	}
	if asked, want := s.keyLookups.asked.Load(), int64(n-bound); asked != want {
		t.Fatalf("retries asked Postgres %d times, want %d (the forgotten keys)", asked, want)
	}
	if rows := s.countRows("turns"); rows != n {
		t.Fatalf("turn rows = %d, want %d", rows, n)
	}
}

// A restart loads only the newest MaxIdempotencyKeys keys of the window
// into memory, and the older ones into the filter of forgotten keys: a new
// key asks nobody, and a retry of an older key, left in Postgres, still
// gets the original turn and stores nothing.
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

	idem := s.idem
	if idem.LoadedRows() != bound || idem.Len() != bound {
		t.Fatalf("start-up read %d keys from Postgres and holds %d, want %d and %d", idem.LoadedRows(), idem.Len(), bound, bound)
	}
	for i, req := range reqs {
		held := idem.Holds(idemindex.NewKey(ten.No, h.ContextID, req.IdempotencyKey))
		if want := i >= n-bound; held != want {
			t.Fatalf("key %d held in memory: %v, want %v (the %d newest)", i, held, want, bound)
		}
	}
	// The streamed rows are the generated query's.
	q := s.as(pgrole.Recovery, "")
	arg := storedb.ListNewestIdempotencyKeysParams{Since: time.Now().Add(-IdempotencyWindow), MaxKeys: bound}
	listed, err := q.ListNewestIdempotencyKeys(context.Background(), arg)
	if err != nil {
		t.Fatal(err)
	}
	var streamed []storedb.ListNewestIdempotencyKeysRow
	if err := q.ForEachNewestIdempotencyKey(context.Background(), arg, func(r *storedb.ListNewestIdempotencyKeysRow) error {
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

	// The older keys are in the filter of forgotten keys: new keys are
	// answered from memory, without asking Postgres.
	for i := range n {
		req := turnReq(h.ContextID, 0, payloadN(100+i))
		req.IdempotencyKey = []byte("new-after-restart-" + strconv.Itoa(i))
		if r := s.append(ten, req); r.Replayed {
			t.Fatalf("new key %d after restart = %+v, replayed", i, r)
		}
	}
	if asked := s.keyLookups.asked.Load(); asked != 0 {
		t.Fatalf("%d new keys after the restart asked Postgres %d times, want 0", n, asked)
	}
	if turns := s.countRows("turns"); turns != 2*n {
		t.Fatalf("turn rows %d after the new keys, want %d", turns, 2*n)
	}
	s.reopen() // memory holds the newest again: the new keys
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
	if turns, keys := s.countRows("turns"), s.countRows("idempotency_keys"); turns != 2*n || keys != 2*n {
		t.Fatalf("turn rows %d, key rows %d after the retries; want %d each", turns, keys, 2*n)
	}
	if asked := s.keyLookups.asked.Load(); asked == 0 {
		t.Fatal("retries of keys left in Postgres did not ask it")
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

// A key reused after its window but before the purge makes a new turn, and
// its new row stands beside the expired one until the purge: memory,
// Postgres (when memory may have forgotten the key) and a restart all
// answer a retry with the new turn, and the purge deletes only the old row.
func TestIdempotencyKeyReusedAfterItsWindowBeforeThePurge(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); clock = clock.Add(d) }
	ctx := context.Background()
	pool, dir := pgtest.NewPool(t), t.TempDir()
	open := func() *Engine {
		// A cap of one key: the second key below makes memory forget the
		// first, so its retry is answered from Postgres.
		e, err := Open(ctx, Options{Dir: dir, Pool: pool, Now: now, MaxIdempotencyKeys: 1})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := open()
	defer func() { e.Close() }()
	ten, err := e.Tenant(ctx, ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.CreateContext(ctx, ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	req := turnReq(h.ContextID, 0, []byte("once a day"))
	req.IdempotencyKey = []byte("daily")
	first, err := e.Append(ctx, ten, req)
	if err != nil {
		t.Fatal(err)
	}
	advance(IdempotencyWindow + time.Minute) // expired, not yet purged
	second, err := e.Append(ctx, ten, req)
	if err != nil || second.TurnID == first.TurnID || second.Replayed {
		t.Fatalf("reuse after the window: %+v, %v; want a new turn", second, err)
	}
	rows := func() (n int) {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE idempotency_key = 'daily'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(); n != 2 {
		t.Fatalf("%d rows of the reused key before the purge, want 2 (expired and new)", n)
	}
	retry := func(when string) {
		t.Helper()
		r, err := e.Append(ctx, ten, req)
		if err != nil || r.TurnID != second.TurnID || !r.Replayed {
			t.Fatalf("retry %s: %+v, %v; want turn %d replayed", when, r, err, second.TurnID)
		}
	}
	retry("from memory")

	other := turnReq(h.ContextID, 0, []byte("another"))
	other.IdempotencyKey = []byte("another")
	if _, err := e.Append(ctx, ten, other); err != nil {
		t.Fatal(err)
	}
	if e.idem.Holds(idemindex.NewKey(ten.No, h.ContextID, req.IdempotencyKey)) {
		t.Fatal("memory still holds the reused key past its cap of one")
	}
	retry("from Postgres")

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = open()
	retry("after a restart")

	if n, err := e.PurgeIdempotencyKeys(ctx); err != nil || n != 1 || rows() != 1 {
		t.Fatalf("purge: %d, %v; %d rows of the reused key left, want 1 deleted and 1 left", n, err, rows())
	}
	retry("after the purge")
}

// Appends that ask Postgres about their keys at once are answered by
// shared queries, each with its own key's turn: retries of keys memory
// forgot get their original turns, and the same keys used in another
// context, at the same time, make new turns.
func TestIdempotencyLookupsTogether(t *testing.T) {
	const n = 40
	s := newTestStore(t)
	s.maxIdemKeys = 3
	s.reopen()
	ten := s.defaultTenant()
	old, fresh := s.create(ten, 0), s.create(ten, 0)
	retries, news := make([]*AppendRequest, n), make([]*AppendRequest, n)
	first := make([]AppendResult, n)
	for i := range retries {
		retries[i] = turnReq(old.ContextID, 0, payloadN(i))
		retries[i].IdempotencyKey = []byte("together-" + strconv.Itoa(i))
		first[i] = s.append(ten, retries[i])
		news[i] = turnReq(fresh.ContextID, 0, payloadN(n+i))
		news[i].IdempotencyKey = retries[i].IdempotencyKey // the same key, another context
	}
	type result struct {
		i     int
		retry bool
		r     AppendResult
		err   error
	}
	results := make(chan result, 2*n)
	for i := range n {
		go func() {
			r, err := s.Append(context.Background(), ten, retries[i])
			results <- result{i, true, r, err}
		}()
		go func() {
			r, err := s.Append(context.Background(), ten, news[i])
			results <- result{i, false, r, err}
		}()
	}
	made := make(map[uint64]bool)
	for range 2 * n {
		res := <-results
		switch {
		case res.err != nil:
			t.Errorf("append %d (retry %v): %v", res.i, res.retry, res.err)
		case res.retry && (res.r.TurnID != first[res.i].TurnID || !res.r.Replayed):
			t.Errorf("retry of key %d = %+v, want turn %d replayed", res.i, res.r, first[res.i].TurnID)
		case !res.retry && (res.r.Replayed || res.r.ContextID != fresh.ContextID || made[res.r.TurnID]):
			t.Errorf("key %d in another context = %+v, want a new turn of context %d", res.i, res.r, fresh.ContextID)
		case !res.retry:
			made[res.r.TurnID] = true
		}
	}
	if rows := s.countRows("turns"); rows != 2*n {
		t.Fatalf("turn rows = %d, want %d", rows, 2*n)
	}
}

// An append whose key was checked longer ago than the ring's slack (more
// keys came in between than memory keeps after forgetting one) is
// refused, retryable, rather than planned as new: its key, held at the
// check, may have left memory since without the check having said so.
// Retried, it checks again, asks Postgres and gets its turn.
func TestIdempotencyCheckOlderThanTheSlackIsRefused(t *testing.T) {
	const bound = 3
	s := newTestStore(t)
	s.maxIdemKeys = bound
	s.reopen()
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	req := turnReq(h.ContextID, 0, []byte("checked long ago"))
	req.IdempotencyKey = []byte("checked-long-ago")
	first := s.append(ten, req)

	// The retry's check, as Append makes it: the key is held.
	key := idemindex.NewKey(ten.No, h.ContextID, req.IdempotencyKey)
	mark := s.idem.Mark()
	if s.idem.MayMiss(key, time.Now().Add(-IdempotencyWindow)) {
		t.Fatal("a key just used may be missing")
	}
	// More keys than the cap and the slack come before it is planned.
	other := s.create(ten, 0)
	for i := range bound + idemindex.Slack(bound) {
		r := turnReq(other.ContextID, 0, payloadN(i))
		r.IdempotencyKey = []byte("meanwhile-" + strconv.Itoa(i))
		s.append(ten, r)
	}
	o := s.committer.Submit(context.Background(), &groupcommit.Job{
		Tenant: ten, Request: req, Raw: req.Payload, Hash: req.ContentHash,
		IdemMark: mark, IdemKey: key, IdemKeySet: true,
	})
	wantKind(t, o.Err, fault.Unavailable)

	if r := s.append(ten, req); r.TurnID != first.TurnID || !r.Replayed {
		t.Fatalf("retry = %+v, want turn %d replayed", r, first.TurnID)
	}
	if n, want := s.countRows("turns"), 1+bound+idemindex.Slack(bound); n != want {
		t.Fatalf("turn rows = %d, want %d", n, want)
	}
}
