// Package assembly chooses which entries of a box fit a token budget: the
// rule of context assembly, without I/O.
//
// Entries come in box order (zone, then position). The permanent zone is
// never left out: a budget smaller than it is a BudgetError. Working
// entries are left out oldest first (first in box order), then stable
// ones, until the rest fits. A card that makes tool calls and the cards
// that answer them (tool_call_id) are kept or left out together, as one
// unit that belongs to its most lasting member's zone.
package assembly

import (
	"fmt"
)

// Zones, in box order (cardbox.Zone's values).
const (
	Permanent = 0
	Stable    = 1
	Working   = 2
)

// Item is one live, non-draft entry to assemble.
type Item struct {
	Zone   int
	Tokens int
	// ToolCallIDs are the ids of the tool calls the card makes;
	// ToolCallID the id of the call it answers.
	ToolCallIDs []string
	ToolCallID  string
}

// BudgetError says a budget is smaller than the box's permanent zone.
type BudgetError struct {
	Budget, Permanent int
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("budget too small: the permanent zone takes %d tokens, %d more than the budget of %d",
		e.Permanent, e.Permanent-e.Budget, e.Budget)
}

// Choose returns which items fit budget (keep[i]), or a BudgetError.
func Choose(items []Item, budget int) (keep []bool, err error) {
	units, unitOf := group(items)
	total, permanent := 0, 0
	for _, u := range units {
		total += u.tokens
		if u.zone == Permanent {
			permanent += u.tokens
		}
	}
	if permanent > budget {
		return nil, &BudgetError{Budget: budget, Permanent: permanent}
	}
	dropped := make([]bool, len(units))
	for _, zone := range []int{Working, Stable} {
		for i, u := range units {
			if total <= budget {
				break
			}
			if u.zone == zone {
				dropped[i] = true
				total -= u.tokens
			}
		}
	}
	keep = make([]bool, len(items))
	for i := range items {
		keep[i] = !dropped[unitOf[i]]
	}
	return keep, nil
}

// unit is items kept or left out together, ordered by their first item.
type unit struct {
	zone, tokens int
}

// group joins each tool call's card with the cards that answer it.
func group(items []Item) ([]unit, []int) {
	parent := make([]int, len(items))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	var callers map[string]int // made only for a box with tool calls
	for i, it := range items {
		for _, id := range it.ToolCallIDs {
			if callers == nil {
				callers = map[string]int{}
			}
			if _, ok := callers[id]; !ok {
				callers[id] = i
			}
		}
	}
	for i, it := range items {
		if c, ok := callers[it.ToolCallID]; ok && it.ToolCallID != "" {
			a, b := find(i), find(c)
			parent[max(a, b)] = min(a, b)
		}
	}
	unitOfRoot := make([]int, len(items)) // a root's unit plus one; 0 for none yet
	units := make([]unit, 0, len(items))
	unitOf := make([]int, len(items))
	for i, it := range items {
		r := find(i)
		if unitOfRoot[r] == 0 {
			units = append(units, unit{zone: it.Zone})
			unitOfRoot[r] = len(units)
		}
		k := unitOfRoot[r] - 1
		units[k].tokens += it.Tokens
		units[k].zone = min(units[k].zone, it.Zone)
		unitOf[i] = k
	}
	return units, unitOf
}
