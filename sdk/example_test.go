package sdk_test

import (
	"context"
	"fmt"

	"github.com/cardboxhq/cardbox/sdk"
	"github.com/cardboxhq/cardbox/sdk/fake"
)

var eventBundle = sdk.Bundle{ID: "example.agent.v1", JSON: []byte(`{"registry_version":1,"bundle_id":"example.agent.v1",
 "types":{"example.Event":{"versions":{"1":{"fields":{"1":{"name":"kind","type":"string"},"2":{"name":"text","type":"string"}}}}}}}`)}

// exampleStore is the Store the agent loop example runs on: the fake,
// unless a test points it at a real server (TestAgentLoopExampleOnServer).
var exampleStore = func() sdk.Store { return fake.New() }

// An agent loop: publish the schema at start-up, make the session's
// context, and append each event with a key derived from the session and
// the turn index, so a retry (or a replay of the same run) never writes a
// turn twice. It runs against the fake (and, in the tests, a real
// server); a real runtime passes the Store sdk.Open returns.
func Example_agentLoop() {
	ctx := context.Background()
	store := exampleStore() // fake.New(), or sdk.Open(sdk.Config{...})
	defer store.Close()

	if err := sdk.PublishBundles(ctx, store, eventBundle); err != nil {
		panic(err)
	}
	session, err := store.CreateContext(ctx, "")
	if err != nil {
		panic(err)
	}
	events := []struct{ kind, text string }{{"input", "list the files"}, {"tool_call", "ls"}, {"assistant", "two files"}}
	for i, e := range events {
		req := sdk.AppendRequest{
			ContextID: session.ContextID, TypeID: "example.Event", TypeVersion: 1,
			Payload:        encodeEvent(e.kind, e.text),
			IdempotencyKey: sdk.AgentKey("session-42", uint64(i), e.kind),
		}
		turn, err := store.AppendTurn(ctx, req)
		if err != nil {
			panic(err) // persistence mode Required: a failed write is the run's error
		}
		// A retry of the same request returns the same turn.
		again, _ := store.AppendTurn(ctx, req)
		fmt.Printf("%s at depth %d (retry: same turn %v)\n", e.kind, turn.Depth, again.TurnID == turn.TurnID)
	}
	last, _ := store.Last(ctx, session.ContextID, 10, false)
	fmt.Println(len(last), "turns")
	// Output:
	// input at depth 1 (retry: same turn true)
	// tool_call at depth 2 (retry: same turn true)
	// assistant at depth 3 (retry: same turn true)
	// 3 turns
}

// encodeEvent is a msgpack map {1: kind, 2: text} (fixmap, fixstr; short
// strings only).
func encodeEvent(kind, text string) []byte {
	b := []byte{0x82, 0x01, 0xa0 | byte(len(kind))}
	b = append(b, kind...)
	b = append(b, 0x02, 0xa0|byte(len(text)))
	return append(b, text...)
}

// Deterministic idempotency keys for the two patterns of the integration
// spec.
func ExampleAttractorKey() {
	fmt.Println(sdk.AttractorKey("run-7", "node/build", "attempt-2", "stage_end", 3))
	fmt.Println(sdk.AgentKey("session-42", 5, "tool_call"))
	// Output:
	// attractor/run-7/node%2Fbuild/attempt-2/stage_end/3
	// agent/session-42/tool_call/5
}

// Persistence mode Off: nothing is written, nothing fails, reads are
// empty.
func ExampleDisabled() {
	store, _ := sdk.Open(sdk.Config{Mode: sdk.Off})
	ctx := context.Background()
	h, err := store.CreateContext(ctx, "")
	fmt.Printf("context %q, err %v\n", h.ContextID, err)
	_, err = store.AppendTurn(ctx, sdk.AppendRequest{ContextID: h.ContextID, TypeID: "t", Payload: []byte{0x80}})
	turns, _ := store.Last(ctx, h.ContextID, 10, true)
	fmt.Println(err, len(turns))
	// Output:
	// context "", err <nil>
	// <nil> 0
}
