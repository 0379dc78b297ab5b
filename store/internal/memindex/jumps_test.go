package memindex

import (
	"slices"
	"testing"
)

func TestJumps(t *testing.T) {
	c := NewContextTable()
	c.Put(1, ContextState{Tenant: 7, Head: 10})
	c.Put(2, ContextState{Tenant: 7})
	c.Put(3, ContextState{Tenant: 8})
	c.AddJump(7, 1, 4)
	c.AddJump(7, 1, 4) // again: kept once
	c.AddJump(7, 1, 0) // no parent: not a jump
	c.AddJump(7, 2, 5)
	c.AddJump(8, 3, 6)

	sorted := func(s []uint64) []uint64 { slices.Sort(s); return s }
	tests := []struct {
		name string
		step func() // before the check
		got  func() []uint64
		want []uint64
	}{
		{"context 1", nil, func() []uint64 { return c.Jumps(1) }, []uint64{4}},
		{"tenant 7 live", nil, func() []uint64 { return sorted(c.LiveJumps(7)) }, []uint64{4, 5}},
		{"tenant 8 live", nil, func() []uint64 { return c.LiveJumps(8) }, []uint64{6}},
		{"tenant 7 after a drop", func() { c.Drop(2) }, func() []uint64 { return c.LiveJumps(7) }, []uint64{4}},
		{"a dropped context keeps its jumps", nil, func() []uint64 { return c.Jumps(2) }, []uint64{5}},
		{"forgotten", func() { c.ForgetJumps([]int64{2}) }, func() []uint64 { return c.Jumps(2) }, nil},
		{"forgotten tenant", func() { c.Forget(8) }, func() []uint64 { return c.Jumps(3) }, nil},
	}
	for _, tt := range tests {
		if tt.step != nil {
			tt.step()
		}
		if got := tt.got(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
