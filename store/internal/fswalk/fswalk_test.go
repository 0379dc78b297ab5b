package fswalk

import (
	"errors"
	"testing"

	"github.com/cardboxhq/cardbox/internal/ident"
)

func h(b byte) ident.Hash { return ident.Hash{b} }

func TestWalk(t *testing.T) {
	// 1 -> {2 (tree), 10}; 2 -> {10, 11}; 3 -> {2, 12}; 4 unreadable.
	trees := map[ident.Hash][]Child{
		h(1): {{Hash: h(2), Tree: true}, {Hash: h(10)}},
		h(2): {{Hash: h(10)}, {Hash: h(11)}},
		h(3): {{Hash: h(2), Tree: true}, {Hash: h(12)}},
	}
	read := func(x ident.Hash) ([]Child, error) {
		c, ok := trees[x]
		if !ok {
			return nil, errors.New("not a tree")
		}
		return c, nil
	}
	tests := []struct {
		name     string
		budget   int
		roots    []ident.Hash
		want     []ident.Hash
		complete bool
	}{
		{"one root", 10, []ident.Hash{h(1)}, []ident.Hash{h(1), h(2), h(10), h(11)}, true},
		{"shared subtree visited once", 10, []ident.Hash{h(1), h(3)}, []ident.Hash{h(1), h(2), h(10), h(11), h(3), h(12)}, true},
		{"unreadable root", 10, []ident.Hash{h(4)}, []ident.Hash{h(4)}, false},
		{"budget runs out", 1, []ident.Hash{h(1)}, []ident.Hash{h(1), h(10)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := New(read, tt.budget)
			got := map[ident.Hash]int{}
			complete := true
			for _, r := range tt.roots {
				complete = w.Walk(r, func(x ident.Hash) { got[x]++ }) && complete
			}
			if complete != tt.complete {
				t.Errorf("complete = %v, want %v", complete, tt.complete)
			}
			if len(got) != len(tt.want) {
				t.Errorf("visited %v, want %v", got, tt.want)
			}
			for _, x := range tt.want {
				if got[x] != 1 {
					t.Errorf("visited %x %d times, want once", x[:1], got[x])
				}
			}
		})
	}
}
