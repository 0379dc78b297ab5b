package groupcommit

import (
	"strconv"

	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/store/internal/memindex"
)

// headMoved is the answer to a conditional append (AppendRequest.IfHead)
// whose parent is no longer, or not yet, the context's head. The
// committer decides it while planning the append's group, against the
// heads that group and the groups in flight leave, so of two conditional
// appends naming the same head exactly one commits.
func headMoved(contextID, expected uint64, state memindex.ContextState) *fault.Error {
	now := "is turn " + strconv.FormatUint(state.Head, 10)
	if state.Head == 0 {
		now = "is empty"
	}
	err := fault.New(fault.HeadMoved, "context %d %s, not at turn %d as the conditional append expects: another append moved its head; read the head and decide again",
		contextID, now, expected)
	err.Details = map[string]any{
		"context_id":    strconv.FormatUint(contextID, 10),
		"head_turn_id":  strconv.FormatUint(state.Head, 10),
		"head_depth":    state.Depth,
		"expected_head": strconv.FormatUint(expected, 10),
	}
	return err
}
