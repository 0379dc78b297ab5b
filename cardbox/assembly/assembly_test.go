package assembly

import (
	"errors"
	"slices"
	"testing"
)

func TestChoose(t *testing.T) {
	p := func(n int) Item { return Item{Zone: Permanent, Tokens: n} }
	s := func(n int) Item { return Item{Zone: Stable, Tokens: n} }
	w := func(n int) Item { return Item{Zone: Working, Tokens: n} }
	call := Item{Zone: Working, Tokens: 5, ToolCallIDs: []string{"c1"}}
	result := Item{Zone: Working, Tokens: 5, ToolCallID: "c1"}
	for _, tt := range []struct {
		name   string
		items  []Item
		budget int
		want   []bool
	}{
		{"all fit", []Item{p(10), s(10), w(10)}, 30, []bool{true, true, true}},
		{"oldest working first", []Item{p(10), w(10), w(10), w(10)}, 30, []bool{true, false, true, true}},
		{"working before stable", []Item{p(10), s(10), w(10), w(10)}, 30, []bool{true, true, false, true}},
		{"then stable", []Item{p(10), s(10), s(10), w(10)}, 15, []bool{true, false, false, false}},
		{"exactly the permanent zone", []Item{p(10), w(1)}, 10, []bool{true, false}},
		{"tool call and result go together", []Item{p(10), call, w(3), result}, 18, []bool{true, false, true, false}},
		{"tool call and result stay together", []Item{p(10), w(3), call, result}, 20, []bool{true, false, true, true}},
		{"a permanent result keeps its call", []Item{p(10), call, {Zone: Permanent, Tokens: 1, ToolCallID: "c1"}}, 16, []bool{true, true, true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Choose(tt.items, tt.budget)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("Choose = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestChooseShort(t *testing.T) {
	_, err := Choose([]Item{{Zone: Permanent, Tokens: 30}, {Zone: Working, Tokens: 5}}, 20)
	var se *BudgetError
	if !errors.As(err, &se) || se.Permanent != 30 || se.Budget != 20 {
		t.Fatalf("err = %v", err)
	}
}
