package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/waitfor"
	"github.com/cardboxhq/cardbox/store/internal/groupcommit"
	"github.com/cardboxhq/cardbox/store/turnlog"
)

// TestCrashAtEveryStepKeepsAcknowledgedTurns stops a group commit at each
// step boundary as a crash would, reopens, and checks the invariants: every
// acknowledged turn reads back, the crashed turn exists only if Postgres
// committed it, heads name existing turns, and new appends get fresh ids.
func TestCrashAtEveryStepKeepsAcknowledgedTurns(t *testing.T) {
	for _, tt := range []struct {
		name          string
		at            groupcommit.Step
		crashedExists bool
	}{
		{"after files", groupcommit.StepFilesWritten, false},
		{"after commit", groupcommit.StepCommitted, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t)
			ten := s.defaultTenant()
			h := s.create(ten, 0)
			var acked []AppendResult
			for i := range 5 {
				acked = append(acked, s.append(ten, turnReq(h.ContextID, 0, payloadN(i))))
			}
			var armed atomic.Bool
			armed.Store(true)
			s.Engine.Close()
			s.open(&groupcommit.Hooks{CrashAt: func(st groupcommit.Step) bool { return st == tt.at && armed.Load() }})
			crashed := turnReq(h.ContextID, 0, []byte("in flight at the crash"))
			if _, err := s.Append(context.Background(), ten, crashed); !errors.Is(err, groupcommit.ErrCrashed) {
				t.Fatalf("crashed append: %v", err)
			}
			if _, err := s.Append(context.Background(), ten, turnReq(h.ContextID, 0, []byte("after"))); err == nil {
				t.Fatal("a crashed store took another append")
			}
			s.reopen()

			got := s.last(ten, h.ContextID, 100, true)
			wantLen := len(acked)
			if tt.crashedExists {
				wantLen++
			}
			if len(got) != wantLen {
				t.Fatalf("after recovery %d turns, want %d", len(got), wantLen)
			}
			for i, a := range acked {
				if got[i].ID != a.TurnID || !bytes.Equal(got[i].Payload, payloadN(i)) {
					t.Fatalf("acknowledged turn %d lost: %+v", a.TurnID, got[i])
				}
			}
			head, _ := s.Head(context.Background(), ten, h.ContextID)
			if head.TurnID != got[len(got)-1].ID {
				t.Fatalf("head %d is not the last turn %d", head.TurnID, got[len(got)-1].ID)
			}
			next := s.append(ten, turnReq(h.ContextID, 0, []byte("next")))
			if next.TurnID <= got[len(got)-1].ID || next.Depth != uint32(wantLen+1) {
				t.Fatalf("append after recovery = %+v", next)
			}
		})
	}
}

func TestTornTurnLogTailIsCut(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	for i := range 3 {
		s.append(ten, turnReq(h.ContextID, 0, payloadN(i)))
	}
	s.Engine.Close()
	// Half a record of garbage past the committed end, as a crash mid-write
	// leaves it.
	f, err := os.OpenFile(turnLogPath(s.dir), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(bytes.Repeat([]byte{0xAB}, turnlog.RecordSize/2))
	f.Close()
	s.open(nil)
	if got := s.last(ten, h.ContextID, 10, true); len(got) != 3 {
		t.Fatalf("after torn tail: %d turns", len(got))
	}
	if st := s.Stats(); st.LogBytes != 3*turnlog.RecordSize {
		t.Fatalf("torn tail not cut: log is %d bytes", st.LogBytes)
	}
}

func TestCorruptCommittedRecordRefusesToOpen(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	for i := range 3 {
		s.append(ten, turnReq(h.ContextID, 0, payloadN(i)))
	}
	s.Engine.Close()
	b, err := os.ReadFile(turnLogPath(s.dir))
	if err != nil {
		t.Fatal(err)
	}
	b[turnlog.RecordSize+10] ^= 0xFF
	if err := os.WriteFile(turnLogPath(s.dir), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), Options{Dir: s.dir, Pool: s.pool}); err == nil {
		t.Fatal("opened a store whose committed turn record is corrupt")
	}
	after, _ := os.ReadFile(turnLogPath(s.dir))
	if !bytes.Equal(after, b) {
		t.Fatal("a failed open modified the turn log")
	}
}

func TestMismatchedDirectoryAndDatabaseAreRefused(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	s.append(ten, turnReq(h.ContextID, 0, []byte("x")))
	s.Engine.Close()
	if _, err := Open(context.Background(), Options{Dir: t.TempDir(), Pool: s.pool}); err == nil {
		t.Fatal("opened an empty directory against a database that has a store")
	}
	other := newTestStore(t)
	other.Engine.Close()
	if _, err := Open(context.Background(), Options{Dir: s.dir, Pool: other.pool}); err == nil {
		t.Fatal("opened a directory against another store's database")
	}
}

// TestFailedCommitFailsTheGroupsBuiltOnIt injects commit failures into a
// busy pipeline: the failed groups' appends, and those planned on top of
// them, get errors; everything acknowledged is readable before and after a
// reopen, nothing unacknowledged is, and heads stay linear.
func TestFailedCommitFailsTheGroupsBuiltOnIt(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	s.Engine.Close()
	var groups atomic.Int64
	s.open(&groupcommit.Hooks{FailCommit: func() bool { return groups.Add(1)%7 == 3 }})

	var mu sync.Mutex
	acked := map[uint64][]byte{}
	var failures atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 40 {
				payload := payloadN(w*1000 + i)
				r, err := s.Append(context.Background(), ten, turnReq(h.ContextID, 0, payload))
				if err != nil {
					failures.Add(1)
					continue
				}
				mu.Lock()
				acked[r.TurnID] = payload
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failures.Load() == 0 {
		t.Fatal("no append failed: the injection did not fire")
	}
	// Every group, failed or committed, no longer holds up a compaction
	// of the pack.
	waitfor.True(t, "no group counted as a deduplication in flight", 10*time.Second, func() bool {
		return s.Engine.dedup.InFlight() == 0
	})
	check := func(when string) {
		got := s.last(ten, h.ContextID, 1000, true)
		if len(got) != len(acked) {
			t.Fatalf("%s: %d turns in the chain, %d acknowledged", when, len(got), len(acked))
		}
		for i, turn := range got {
			if turn.Depth != uint32(i+1) || !bytes.Equal(acked[turn.ID], turn.Payload) {
				t.Fatalf("%s: turn %d (depth %d) is not an acknowledged append", when, turn.ID, turn.Depth)
			}
		}
	}
	check("before reopen")
	s.reopen()
	check("after reopen")
	if n := s.countRows("turns"); n != len(acked) {
		t.Fatalf("turn rows = %d, acknowledged = %d", n, len(acked))
	}
}

// TestDatabaseConnectionsKilledUnderLoad terminates the store's Postgres
// connections while appends run: some appends fail, none that was
// acknowledged is lost, and the store keeps working afterwards.
func TestDatabaseConnectionsKilledUnderLoad(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	stop := make(chan struct{})
	var killer sync.WaitGroup
	killer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			s.pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid()`)
		}
	})
	var mu sync.Mutex
	acked := map[uint64][]byte{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 30 {
				payload := payloadN(w*1000 + i)
				if r, err := s.Append(context.Background(), ten, turnReq(h.ContextID, 0, payload)); err == nil {
					mu.Lock()
					acked[r.TurnID] = payload
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	killer.Wait()
	if err := s.Engine.Healthy(context.Background()); err != nil {
		t.Logf("store after the storm: %v (a restart reconciles)", err)
	}
	// A restart gets fresh connections; this pool still holds ones the
	// killer ended.
	s.pool.Reset()
	s.reopen()
	got := s.last(ten, h.ContextID, 1000, true)
	seen := map[uint64]bool{}
	for i, turn := range got {
		if turn.Depth != uint32(i+1) {
			t.Fatalf("chain broken at %d: depth %d", i, turn.Depth)
		}
		seen[turn.ID] = true
	}
	for id := range acked {
		if !seen[id] {
			t.Fatalf("acknowledged turn %d lost", id)
		}
	}
	s.append(ten, turnReq(h.ContextID, 0, []byte("after the storm")))
	t.Logf("%d acknowledged of 240, %d in the chain", len(acked), len(got))
}
