package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cardboxhq/cardbox/internal/fault"
)

func conditional(ctxID, head uint64, payload []byte, key string) *AppendRequest {
	r := turnReq(ctxID, head, payload)
	r.IfHead, r.IdempotencyKey = true, []byte(key)
	return r
}

func wantHeadMoved(t *testing.T, err error, head uint64) {
	t.Helper()
	wantKind(t, err, fault.HeadMoved)
	var se *fault.Error
	if !errors.As(err, &se) || se.Details["head_turn_id"] != fmt.Sprint(head) {
		t.Fatalf("HEAD_MOVED details %v, want head_turn_id %d", se.Details, head)
	}
}

func TestConditionalAppend(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	ctx := context.Background()
	h := s.create(ten, 0)

	first := s.append(ten, conditional(h.ContextID, 0, []byte("first"), "k1"))
	if first.Depth != 1 {
		t.Fatalf("first turn depth %d", first.Depth)
	}
	tests := []struct {
		name string
		req  *AppendRequest
		head uint64 // HEAD_MOVED naming this head; 0: the append succeeds
	}{
		{"expects an empty context", conditional(h.ContextID, 0, []byte("late"), "k2"), first.TurnID},
		{"repeat of a committed key is its turn", conditional(h.ContextID, 0, []byte("first"), "k1"), 0},
		{"expects the head", conditional(h.ContextID, first.TurnID, []byte("second"), "k3"), 0},
		{"expects a head that moved on", conditional(h.ContextID, first.TurnID, []byte("third"), "k4"), first.TurnID + 1},
		{"without a key", conditional(h.ContextID, first.TurnID, []byte("keyless"), ""), first.TurnID + 1},
	}
	for _, tc := range tests {
		res, err := s.Append(ctx, ten, tc.req)
		if tc.head != 0 {
			wantHeadMoved(t, err, tc.head)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.name == "repeat of a committed key is its turn" && (res.TurnID != first.TurnID || !res.Replayed) {
			t.Fatalf("%s: got %+v, want turn %d replayed", tc.name, res, first.TurnID)
		}
	}
	if n := len(s.last(ten, h.ContextID, 10, false)); n != 2 {
		t.Fatalf("chain has %d turns, want 2", n)
	}
	// A plain append still goes after whatever the head is.
	s.append(ten, turnReq(h.ContextID, first.TurnID, []byte("branch")))
}

// Conditional appends racing for one head: in each round exactly one
// commits, every other is HEAD_MOVED naming the winner.
func TestConditionalAppendsRaceForOneHead(t *testing.T) {
	s := newTestStore(t)
	ten := s.defaultTenant()
	h := s.create(ten, 0)
	const writers, rounds = 8, 20
	head := uint64(0)
	for round := range rounds {
		var wg sync.WaitGroup
		results := make([]AppendResult, writers)
		errs := make([]error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := conditional(h.ContextID, head, payloadN(round*100+w), fmt.Sprintf("r%d-w%d", round, w))
				results[w], errs[w] = s.Append(context.Background(), ten, req)
			}()
		}
		wg.Wait()
		var winners []AppendResult
		for w := range writers {
			if errs[w] == nil {
				winners = append(winners, results[w])
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d appends on head %d succeeded, want 1 (errors %v)", round, len(winners), head, errs)
		}
		for w := range writers {
			if errs[w] != nil {
				wantHeadMoved(t, errs[w], winners[0].TurnID)
			}
		}
		head = winners[0].TurnID
	}
	if got := s.last(ten, h.ContextID, 100, false); len(got) != rounds {
		t.Fatalf("chain has %d turns, want %d", len(got), rounds)
	}
}
