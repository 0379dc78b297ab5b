package store

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/waitfor"
)

func (s *testStore) deleteContext(t ident.Tenant, id uint64) {
	s.t.Helper()
	if err := s.DeleteContext(context.Background(), t, id, "test"); err != nil {
		s.t.Fatalf("delete context %d: %v", id, err)
	}
	if _, err := s.ReapDeleted(context.Background()); err != nil {
		s.t.Fatalf("reap: %v", err)
	}
}

// wantReadable checks which turns the tenant can still read.
func (s *testStore) wantReadable(t ident.Tenant, want map[uint64]bool) {
	s.t.Helper()
	for id, readable := range want {
		if _, ok := s.TurnInfo(t, id); ok != readable {
			s.t.Errorf("turn %d readable = %v, want %v", id, ok, readable)
		}
	}
}

func TestDeletedContextKeepsWhatLiveContextsReach(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	a := s.create(ten, 0)
	var at []uint64
	for i := range 5 {
		at = append(at, s.append(ten, turnReq(a.ContextID, 0, payloadN(i))).TurnID)
	}
	fork := s.create(ten, at[2])
	skipped := s.append(ten, turnReq(a.ContextID, at[1], payloadN(9))).TurnID // A's head moves off at[2..4]
	b := s.create(ten, 0)
	b1 := s.append(ten, turnReq(b.ContextID, 0, payloadN(20))).TurnID
	b2 := s.append(ten, turnReq(b.ContextID, 0, payloadN(21))).TurnID
	b3 := s.append(ten, turnReq(b.ContextID, b1, payloadN(22))).TurnID // b2 is skipped, B is live

	s.deleteContext(ten, a.ContextID)
	if _, err := s.Context(ten, a.ContextID); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("deleted context: got %v, want not found", err)
	}
	_, err := s.Append(context.Background(), ten, turnReq(a.ContextID, 0, payloadN(30)))
	wantKind(t, err, fault.NotFound)
	_, err = s.CreateContext(context.Background(), ten, at[4], "")
	wantKind(t, err, fault.NotFound) // a fork of a dead turn
	want := map[uint64]bool{
		at[0]: true, at[1]: true, at[2]: true, // the fork reaches them
		at[3]: false, at[4]: false, skipped: false,
		b1: true, b2: true, b3: true,
	}
	s.wantReadable(ten, want)

	s.deleteContext(ten, fork.ContextID)
	want[at[0]], want[at[1]], want[at[2]] = false, false, false
	s.wantReadable(ten, want)
	if n := s.countRows("dead_turns"); n != 6 {
		t.Errorf("dead_turns has %d rows, want 6", n)
	}
	if n := s.countRows("turns"); n != 3 {
		t.Errorf("turns has %d rows, want B's 3", n)
	}

	s.reopen()
	s.wantReadable(ten, want)
	if _, err := s.Context(ten, a.ContextID); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("deleted context after reopen: got %v, want not found", err)
	}
	if got := len(s.Contexts(ten)); got != 1 {
		t.Errorf("%d contexts listed, want B", got)
	}
}

// The reaper may run while a deletion is half-way: the contexts marked
// deleted in Postgres, still live in memory, their dead turns not yet
// worked out. Whatever it reaped then, every turn no live context reaches
// dies once the last context reaching it is deleted, rows and all, and
// stays dead after a restart.
func TestReapingDuringADeletion(t *testing.T) {
	tests := []struct {
		name     string
		duringOf map[string]bool // the deletions the reaper runs during: "a", "fork"
	}{
		{"during the deletion of the forked context", map[string]bool{"a": true}},
		{"during the deletion of the fork", map[string]bool{"fork": true}},
		{"during both", map[string]bool{"a": true, "fork": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t)
			var during string
			s.afterMarkDeleted = func() {
				if tt.duringOf[during] {
					if _, err := s.ReapDeleted(context.Background()); err != nil {
						t.Errorf("reap during the deletion of %s: %v", during, err)
					}
				}
			}
			s.reopen()
			ten := s.defaultTenant()
			a := s.create(ten, 0)
			var at []uint64
			for i := range 5 {
				at = append(at, s.append(ten, turnReq(a.ContextID, 0, payloadN(i))).TurnID)
			}
			fork := s.create(ten, at[2])
			skipped := s.append(ten, turnReq(a.ContextID, at[1], payloadN(9))).TurnID // A's head moves off at[2..4]
			b := s.create(ten, 0)
			b1 := s.append(ten, turnReq(b.ContextID, 0, payloadN(20))).TurnID

			during = "a"
			s.deleteContext(ten, a.ContextID)
			want := map[uint64]bool{
				at[0]: true, at[1]: true, at[2]: true, // the fork reaches them
				at[3]: false, at[4]: false, skipped: false,
				b1: true,
			}
			s.wantReadable(ten, want)
			if n := s.countRows("dead_turns"); n != 3 {
				t.Errorf("after A's deletion dead_turns has %d rows, want 3", n)
			}

			during = "fork"
			s.deleteContext(ten, fork.ContextID)
			want[at[0]], want[at[1]], want[at[2]] = false, false, false
			s.wantReadable(ten, want)
			if n := s.countRows("dead_turns"); n != 6 {
				t.Errorf("dead_turns has %d rows, want 6", n)
			}
			if n := s.countRows("turns"); n != 1 {
				t.Errorf("turns has %d rows, want B's", n)
			}
			s.reopen()
			s.wantReadable(ten, want)
		})
	}
}

func TestDeletingTwiceOrAnotherTenantsContextIsNotFound(t *testing.T) {
	s := newTestStore(t)
	acme, other := s.tenant("acme"), s.tenant("other")
	c := s.create(acme, 0)
	wantKind(t, s.DeleteContext(context.Background(), other, c.ContextID, "test"), fault.NotFound)
	s.deleteContext(acme, c.ContextID)
	wantKind(t, s.DeleteContext(context.Background(), acme, c.ContextID, "test"), fault.NotFound)
	wantKind(t, s.DeleteContext(context.Background(), acme, 1<<40, "test"), fault.NotFound)
}

// Appends and forks racing a deletion: none succeeds after it answered,
// nothing brings the context back, and every fork that was created keeps
// its base turn readable.
func TestDeletionRacingAppendsAndForks(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	c := s.create(ten, 0)
	first := s.append(ten, turnReq(c.ContextID, 0, payloadN(0))).TurnID
	var (
		mu      sync.Mutex
		forks   = map[uint64]uint64{} // fork → base
		deleted = make(chan struct{})
		late    []error
		wg      sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				after := isClosed(deleted)
				if w%2 == 0 {
					// An append that starts after the deletion answered must fail.
					_, err := s.Append(context.Background(), ten, turnReq(c.ContextID, 0, payloadN(w*1000+i)))
					if after {
						if err == nil || fault.KindOf(err) != fault.NotFound {
							mu.Lock()
							late = append(late, err)
							mu.Unlock()
						}
						return
					}
					continue
				}
				if after {
					return
				}
				h, err := s.Head(context.Background(), ten, c.ContextID)
				if err != nil || h.TurnID == 0 {
					continue
				}
				if f, err := s.CreateContext(context.Background(), ten, h.TurnID, ""); err == nil {
					mu.Lock()
					forks[f.ContextID] = h.TurnID
					mu.Unlock()
				}
			}
		})
	}
	waitForTurns(t, s, ten, c.ContextID, 20)
	if err := s.DeleteContext(context.Background(), ten, c.ContextID, "test"); err != nil {
		t.Fatal(err)
	}
	close(deleted)
	wg.Wait()
	if len(late) > 0 {
		t.Fatalf("appends after the deletion answered: %v (want not found)", late)
	}
	if _, err := s.ReapDeleted(context.Background()); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		if _, err := s.Context(ten, c.ContextID); fault.KindOf(err) != fault.NotFound {
			t.Fatalf("deleted context came back: %v", err)
		}
		for f, base := range forks {
			if _, ok := s.TurnInfo(ten, base); !ok {
				t.Errorf("fork %d lost its base turn %d", f, base)
			}
		}
		if _, ok := s.TurnInfo(ten, first); !ok && len(forks) > 0 {
			t.Errorf("the root turn every fork reaches died")
		}
	}
	check()
	s.reopen()
	check()
}

func waitForTurns(t *testing.T, s *testStore, ten ident.Tenant, id uint64, n uint32) {
	t.Helper()
	for {
		h, err := s.Head(context.Background(), ten, id)
		if err != nil {
			t.Fatal(err)
		}
		if h.Depth >= n {
			return
		}
		// Appends are running; the head moves with each group.
		s.append(ten, turnReq(id, 0, payloadN(int(h.Depth)+500000)))
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Forks racing a deletion, with the reaper held back: once the deletion
// has answered, a fork from one of the context's turns succeeds exactly
// when a fork created before reaches that turn, and the turns no fork
// reaches are unreadable at once, before any reaping.
func TestForksFailAtOnceAfterDeletion(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	c := s.create(ten, 0)
	var at []uint64
	for i := range 10 {
		at = append(at, s.append(ten, turnReq(c.ContextID, 0, payloadN(i))).TurnID)
	}
	// Forks are racing from the lower half only: the upper half dies.
	const racing = 5
	s.create(ten, at[0])
	var (
		mu       sync.Mutex
		reached  = 0 // the highest index of at a fork created so far reaches
		deleted  = make(chan struct{})
		unwanted []error
		wg       sync.WaitGroup
	)
	s.reapMu.Lock() // the reaper waits until the checks are done
	reaperHeld := true
	defer func() {
		if reaperHeld {
			s.reapMu.Unlock()
		}
	}()
	for w := range 4 {
		wg.Go(func() {
			for i := w; !isClosed(deleted); i++ {
				base := i % racing
				_, err := s.CreateContext(context.Background(), ten, at[base], "")
				mu.Lock()
				switch {
				case err == nil:
					reached = max(reached, base)
				case fault.KindOf(err) != fault.NotFound:
					unwanted = append(unwanted, err)
				}
				mu.Unlock()
			}
		})
	}
	if err := s.DeleteContext(context.Background(), ten, c.ContextID, "test"); err != nil {
		t.Fatal(err)
	}
	close(deleted)
	wg.Wait()
	if len(unwanted) > 0 {
		t.Fatalf("forks failed otherwise than not found: %v", unwanted)
	}
	check := func(when string) {
		t.Helper()
		for i, id := range at {
			live := i <= reached
			if _, ok := s.TurnInfo(ten, id); ok != live {
				t.Errorf("%s: turn %d readable = %v, want %v", when, i, ok, live)
			}
			_, err := s.CreateContext(context.Background(), ten, id, "")
			if live && err != nil {
				t.Errorf("%s: a fork from turn %d, which a fork reaches: %v", when, i, err)
			}
			if !live && fault.KindOf(err) != fault.NotFound {
				t.Errorf("%s: a fork from dead turn %d: got %v, want not found", when, i, err)
			}
		}
	}
	check("before reaping")
	reaperHeld = false
	s.reapMu.Unlock()
	if _, err := s.ReapDeleted(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("after reaping")
}

// DeleteContexts deletes several contexts at once as DeleteContext deletes
// each: their dead turns hidden at its answer, the turns a live fork
// reaches kept, one audit record per context; ids of no live context of
// the tenant are left out.
func TestDeleteContextsAtOnce(t *testing.T) {
	s := newTestStore(t)
	ten, other := s.defaultTenant(), s.tenant("other")
	a := s.create(ten, 0)
	var at []uint64
	for i := range 5 {
		at = append(at, s.append(ten, turnReq(a.ContextID, 0, payloadN(i))).TurnID)
	}
	fork := s.create(ten, at[2])
	f1 := s.append(ten, turnReq(fork.ContextID, 0, payloadN(10))).TurnID
	b := s.create(ten, 0)
	b1 := s.append(ten, turnReq(b.ContextID, 0, payloadN(20))).TurnID
	c := s.create(ten, 0)
	c1 := s.append(ten, turnReq(c.ContextID, 0, payloadN(30))).TurnID
	c2 := s.append(ten, turnReq(c.ContextID, 0, payloadN(31))).TurnID
	empty := s.create(ten, 0)
	elsewhere := s.create(other, 0)
	audits := s.countRows("audit_log WHERE action = 'context.delete'")

	ctx := context.Background()
	for _, step := range []struct {
		ids      []uint64
		deleted  []uint64
		readable map[uint64]bool // before the reaper runs
	}{
		{
			ids:     []uint64{c.ContextID, a.ContextID, 1 << 40, elsewhere.ContextID, empty.ContextID},
			deleted: []uint64{a.ContextID, c.ContextID, empty.ContextID},
			readable: map[uint64]bool{
				at[0]: true, at[1]: true, at[2]: true, at[3]: false, at[4]: false, // the fork reaches at[0..2]
				f1: true, b1: true, c1: false, c2: false,
			},
		},
		{
			ids:      []uint64{a.ContextID, fork.ContextID},
			deleted:  []uint64{fork.ContextID},
			readable: map[uint64]bool{at[0]: false, at[1]: false, at[2]: false, f1: false, b1: true},
		},
	} {
		got, err := s.DeleteContexts(ctx, ten, step.ids, "test")
		if err != nil || !slices.Equal(got, step.deleted) {
			t.Fatalf("DeleteContexts(%v) = %v, %v; want %v", step.ids, got, err, step.deleted)
		}
		s.wantReadable(ten, step.readable)
		for _, id := range step.deleted {
			if _, err := s.Context(ten, id); fault.KindOf(err) != fault.NotFound {
				t.Fatalf("deleted context %d: got %v, want not found", id, err)
			}
		}
	}
	if _, err := s.ReapDeleted(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Context(other, elsewhere.ContextID); err != nil {
		t.Fatalf("the other tenant's context: %v", err)
	}
	if n := s.countRows("audit_log WHERE action = 'context.delete'") - audits; n != 4 {
		t.Errorf("%d deletions audited, want 4", n)
	}
	if n := s.countRows("dead_turns"); n != 8 {
		t.Errorf("dead_turns has %d rows, want 8", n)
	}
	if n := s.countRows("turns"); n != 1 {
		t.Errorf("turns has %d rows, want B's", n)
	}
}

// A live context keeps alive what any of its turns reaches, not only its
// head: a turn it appended with an explicit parent in a deleted context
// stays readable with its ancestors after its head moved away. Those
// turns die once the last context reaching them is deleted, whether the
// contexts' jumps were recorded as they appended or read back at start.
func TestLiveContextsKeepWhatTheirTurnsReach(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "after a restart"}[reopen], func(t *testing.T) {
			s := newTestStore(t)
			ten := s.defaultTenant()
			a := s.create(ten, 0)
			var at []uint64
			for i := range 3 {
				at = append(at, s.append(ten, turnReq(a.ContextID, 0, payloadN(i))).TurnID)
			}
			l := s.create(ten, 0)
			l0 := s.append(ten, turnReq(l.ContextID, 0, payloadN(10))).TurnID
			l1 := s.append(ten, turnReq(l.ContextID, at[1], payloadN(11))).TurnID // a jump into A
			l2 := s.append(ten, turnReq(l.ContextID, l0, payloadN(12))).TurnID    // L's head leaves l1
			fork := s.create(ten, at[0])                                          // no turns of its own
			if reopen {
				s.reopen()
			}

			s.deleteContext(ten, a.ContextID)
			want := map[uint64]bool{at[0]: true, at[1]: true, at[2]: false, l0: true, l1: true, l2: true}
			s.wantReadable(ten, want)

			s.deleteContext(ten, l.ContextID)
			want[at[1]], want[l0], want[l1], want[l2] = false, false, false, false
			s.wantReadable(ten, want) // at[0] lives on in the fork

			s.deleteContext(ten, fork.ContextID)
			want[at[0]] = false
			s.wantReadable(ten, want)
			if n := s.countRows("turns"); n != 0 {
				t.Errorf("turns has %d rows, want none", n)
			}
			if n := s.countRows("dead_turns"); n != 6 {
				t.Errorf("dead_turns has %d rows, want 6", n)
			}
		})
	}
}

// The burial of dead turns waits for the analytics projector's batches of
// the tenant (they add to the rollups it takes the turns out of, and the
// two deadlocked) and buries once they commit.
func TestBurialWaitsForTheProjector(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	c := s.create(ten, 0)
	s.append(ten, turnReq(c.ContextID, 0, payloadN(1)))
	ctx := context.Background()
	batch, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { batch.Rollback(context.Background()) })
	// As the projector's batch does (HoldOffBurials; 7372 is the class).
	if _, err := batch.Exec(ctx, "SELECT pg_advisory_xact_lock_shared(7372, $1::integer)", int32(ten.No)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteContext(ctx, ten, c.ContextID, "test"); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan error, 1)
	go func() {
		_, err := s.ReapDeleted(ctx)
		reaped <- err
	}()
	waitfor.True(t, "the burial to wait for the projector's batch", 20*time.Second, func() bool {
		var n int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%name: LockRollupsForBurial%'`).Scan(&n)
		return err == nil && n > 0
	})
	if n := s.countRows("dead_turns"); n != 0 {
		t.Errorf("%d turns buried while the projector's batch ran", n)
	}
	if err := batch.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-reaped; err != nil {
		t.Fatal(err)
	}
	if n := s.countRows("dead_turns"); n != 1 {
		t.Errorf("%d turns buried, want 1", n)
	}
}
