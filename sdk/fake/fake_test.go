package fake_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cardboxhq/cardbox/sdk"
	"github.com/cardboxhq/cardbox/sdk/fake"
	"github.com/cardboxhq/cardbox/sdk/internal/contract"
)

func TestContract(t *testing.T) {
	contract.Run(t, fake.New())
}

func TestDeterministic(t *testing.T) {
	a := contract.Run(t, fake.New()).String()
	b := contract.Run(t, fake.New()).String()
	if a != b {
		t.Fatalf("two runs differ:\n%s\n---\n%s", a, b)
	}
}

func TestFaultAfterCommitThenRetryReturnsTheTurn(t *testing.T) {
	ctx := context.Background()
	f := fake.New()
	h, err := f.CreateContext(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	lost := errors.New("connection lost")
	f.Fault = func(op string, committed bool) error {
		if op == "AppendTurn" && committed {
			return lost
		}
		return nil
	}
	req := sdk.AppendRequest{ContextID: h.ContextID, TypeID: "t", Payload: []byte("x"), IdempotencyKey: sdk.AgentKey("s", 1, "input")}
	if _, err := f.AppendTurn(ctx, req); !errors.Is(err, lost) {
		t.Fatalf("got %v, want the injected fault", err)
	}
	f.Fault = nil
	got, err := f.AppendTurn(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.TurnID != "1" || got.Depth != 1 {
		t.Fatalf("retry gave %+v, want turn 1 at depth 1", got)
	}
	if last, _ := f.Last(ctx, h.ContextID, 10, false); len(last) != 1 {
		t.Fatalf("%d turns after a retry, want 1", len(last))
	}
}
