package store

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
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
	var se *Error
	if !errors.As(err, &se) || se.Kind != KindConflict {
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
	if n := len(s.committer.idem.m); n != 3 {
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
