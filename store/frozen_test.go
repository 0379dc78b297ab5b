package store

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pgfreeze"
	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store/internal/groupcommit"
)

// answered is an append's answer and how long it took.
type answered struct {
	key  string
	res  AppendResult
	err  error
	took time.Duration
}

// TestFrozenPostgresAnswersInTimeAndLosesNothing stops a private Postgres
// (SIGSTOP of the postmaster and every backend) just before a group's
// COMMIT is sent, so that the COMMIT sits unread in the backend's socket,
// and appends more while it is stopped. Every append is answered
// unavailable within Options.PGTimeout (plus a margin), health fails
// within 2 s, and after SIGCONT the group that was answered 503 turns out
// committed and published: its keyed retry gets that very turn, the
// others' retries append exactly one turn each, new appends succeed, and
// a reopen finds the same chain.
func TestFrozenPostgresAnswersInTimeAndLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private Postgres cluster")
	}
	const bound = 2 * time.Second
	const margin = 1500 * time.Millisecond
	cluster := pgfreeze.NewCluster(t)
	pool, err := pgxpool.New(context.Background(), cluster.NewDB(t, "cardbox"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	dir := t.TempDir()

	var armed atomic.Bool
	var frozen atomic.Pointer[pgfreeze.Frozen]
	freezeErr := make(chan error, 1)
	h := &groupcommit.Hooks{BeforeCommit: func() {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		f, err := pgfreeze.Stop(cluster.PGData())
		if err != nil {
			freezeErr <- err
			return
		}
		frozen.Store(f)
	}}
	open := func(h *groupcommit.Hooks) *Engine {
		e, err := Open(context.Background(), Options{Dir: dir, Pool: pool, PGTimeout: bound, hooks: h})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	e := open(h)
	// Registered after the store's Close, so it runs before it.
	t.Cleanup(func() { frozen.Load().Thaw() })

	ctx := context.Background()
	ten, err := e.Tenant(ctx, ident.DefaultTenantID)
	if err != nil {
		t.Fatal(err)
	}
	head, err := e.CreateContext(ctx, ten, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	keyed := func(key string) *AppendRequest {
		req := turnReq(head.ContextID, 0, []byte("payload of "+key))
		req.IdempotencyKey = []byte(key)
		return req
	}
	acked := map[uint64]string{} // turn id → key
	for i := range 5 {
		key := fmt.Sprintf("before-%d", i)
		r, err := e.Append(ctx, ten, keyed(key))
		if err != nil {
			t.Fatal(err)
		}
		acked[r.TurnID] = key
	}

	answers := make(chan answered, 16)
	appendAsync := func(key string) {
		start := time.Now()
		go func() {
			r, err := e.Append(ctx, ten, keyed(key))
			answers <- answered{key: key, res: r, err: err, took: time.Since(start)}
		}()
	}
	armed.Store(true)
	appendAsync("frozen-commit")
	waitfor.True(t, "Postgres stopped before the group's COMMIT", 10*time.Second, func() bool {
		select {
		case err := <-freezeErr:
			t.Fatalf("freeze: %v", err)
		default:
		}
		return frozen.Load() != nil
	})
	t.Logf("stopped %d Postgres processes", frozen.Load().Processes())
	const inFlight = 8
	for i := range inFlight {
		appendAsync(fmt.Sprintf("in-flight-%d", i))
	}
	healthStart := time.Now()
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	herr := e.Healthy(hctx)
	cancel()
	if took := time.Since(healthStart); herr == nil || took > 2*time.Second+200*time.Millisecond {
		t.Errorf("health with Postgres stopped: %v after %v; want an error within 2s", herr, took)
	}

	var refused []string
	timeout := time.NewTimer(bound + margin + time.Second)
	defer timeout.Stop()
	for range 1 + inFlight {
		select {
		case a := <-answers:
			if a.err == nil {
				t.Errorf("%s acknowledged while Postgres was stopped: %+v", a.key, a.res)
				continue
			}
			wantKind(t, a.err, fault.Unavailable)
			if a.took > bound+margin {
				t.Errorf("%s answered after %v; want within %v", a.key, a.took, bound+margin)
			}
			refused = append(refused, a.key)
		case <-timeout.C:
			t.Fatalf("appends not answered within %v of a stopped Postgres (%d answered)", bound+margin, len(refused))
		}
	}

	frozen.Load().Thaw()
	waitfor.True(t, "the store healthy after SIGCONT", 30*time.Second, func() bool {
		return e.Healthy(ctx) == nil
	})
	// The COMMIT sat in the stopped backend's socket and took effect on
	// SIGCONT: the store publishes the turn its client was refused, once
	// it has asked Postgres whether that group committed (which a healthy
	// store may not have done yet).
	var late uint64
	waitfor.True(t, "the group whose COMMIT Postgres took while stopped readable after SIGCONT", 30*time.Second, func() bool {
		for _, turn := range lastTurns(t, e, ten, head.ContextID) {
			if bytes.Equal(turn.Payload, []byte("payload of frozen-commit")) {
				late = turn.ID
			}
		}
		return late != 0
	})
	// The group settled late no longer holds up a compaction of the pack.
	waitfor.True(t, "no group counted as a deduplication in flight", 10*time.Second, func() bool {
		return e.dedup.InFlight() == 0
	})
	for _, key := range refused {
		first, err := e.Append(ctx, ten, keyed(key))
		if err != nil {
			t.Fatalf("retry %s after SIGCONT: %v", key, err)
		}
		again, err := e.Append(ctx, ten, keyed(key))
		if err != nil || again.TurnID != first.TurnID {
			t.Fatalf("retry %s twice: turns %d and %d (%v)", key, first.TurnID, again.TurnID, err)
		}
		if key == "frozen-commit" && first.TurnID != late {
			t.Fatalf("retry of the late-committed append got turn %d, want %d", first.TurnID, late)
		}
		acked[first.TurnID] = key
	}
	r, err := e.Append(ctx, ten, turnReq(head.ContextID, 0, []byte("after the freeze")))
	if err != nil {
		t.Fatalf("append after SIGCONT: %v", err)
	}
	acked[r.TurnID] = ""

	check := func(e *Engine, when string) {
		t.Helper()
		turns := lastTurns(t, e, ten, head.ContextID)
		if len(turns) != len(acked) {
			t.Fatalf("%s: %d turns in the chain, want %d (one per acknowledged append)", when, len(turns), len(acked))
		}
		for i, turn := range turns {
			key, ok := acked[turn.ID]
			want := "payload of " + key
			if key == "" {
				want = "after the freeze"
			}
			if !ok || turn.Depth != uint32(i+1) || string(turn.Payload) != want {
				t.Fatalf("%s: turn %d at depth %d (%q) is not the acknowledged append %q", when, turn.ID, turn.Depth, turn.Payload, key)
			}
		}
		var rows int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM turns").Scan(&rows); err != nil || rows != len(acked) {
			t.Fatalf("%s: %d turn rows (%v), want %d", when, rows, err, len(acked))
		}
	}
	check(e, "after SIGCONT")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	check(open(nil), "after reopening")
}

// lastTurns reads a context's whole chain with payloads.
func lastTurns(t *testing.T, e *Engine, ten ident.Tenant, contextID uint64) []Turn {
	t.Helper()
	turns, err := e.Last(context.Background(), ten, contextID, 1000, true)
	if err != nil {
		t.Fatal(err)
	}
	return turns
}
