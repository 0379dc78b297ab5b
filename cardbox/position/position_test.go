package position

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBetweenKnownKeys(t *testing.T) {
	for _, tt := range []struct{ a, b, want string }{
		{"", "", "a0"},
		{"", "a0", "Zz"},
		{"a0", "", "a1"},
		{"a0", "a1", "a0V"},
		{"a0V", "a1", "a0l"},
		{"Zz", "a0", "ZzV"},
		{"a1", "a2", "a1V"},
		{"az", "", "b00"},
		{"b00", "", "b01"},
		{"a0", "a0V", "a0G"},
		{"a0", "a0G", "a08"},
	} {
		got, err := Between(tt.a, tt.b)
		if err != nil || got != tt.want {
			t.Errorf("Between(%q, %q) = %q, %v; want %q", tt.a, tt.b, got, err, tt.want)
		}
	}
}

func TestBetweenRefusesBadInput(t *testing.T) {
	for _, tt := range []struct{ a, b string }{
		{"a1", "a0"}, {"a0", "a0"}, {"a00", ""}, {"x", ""}, {"", "!0"}, {"a0 ", ""},
	} {
		if got, err := Between(tt.a, tt.b); err == nil {
			t.Errorf("Between(%q, %q) = %q, want an error", tt.a, tt.b, got)
		}
	}
}

// 9,000 inserts at one spot of a two-entry list, from either side, keep
// the keys in order and short enough to store.
func TestManyInsertsAtOneSpot(t *testing.T) {
	for _, side := range []string{"after first", "before last"} {
		lo, hi := "a0", "a1"
		for i := range 9_000 {
			k, err := Between(lo, hi)
			if err != nil {
				t.Fatalf("%s: insert %d: %v", side, i, err)
			}
			if !(lo < k && k < hi) {
				t.Fatalf("%s: insert %d: %q not between %q and %q", side, i, k, lo, hi)
			}
			if side == "after first" {
				hi = k
			} else {
				lo = k
			}
			if len(k) > 2000 {
				t.Fatalf("%s: insert %d: key of %d bytes", side, i, len(k))
			}
		}
	}
}

// Random inserts keep a list sorted and its keys distinct.
func TestRandomInsertsStaySorted(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var keys []string
	for i := range 3000 {
		at := r.IntN(len(keys) + 1)
		var lo, hi string
		if at > 0 {
			lo = keys[at-1]
		}
		if at < len(keys) {
			hi = keys[at]
		}
		k, err := Between(lo, hi)
		if err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
		keys = slices.Insert(keys, at, k)
	}
	if !slices.IsSorted(keys) {
		t.Fatal("keys out of order")
	}
	if len(slices.Compact(slices.Clone(keys))) != len(keys) {
		t.Fatal("a key was made twice")
	}
}

// FuzzBetween: whatever two strings come in, Between either refuses them
// or returns a valid key strictly between them.
func FuzzBetween(f *testing.F) {
	f.Add("a0", "a1")
	f.Add("", "a0")
	f.Add("Zz", "")
	f.Fuzz(func(t *testing.T, a, b string) {
		k, err := Between(a, b)
		if err != nil {
			return
		}
		if Validate(k) != nil || (a != "" && k <= a) || (b != "" && k >= b) {
			t.Fatalf("Between(%q, %q) = %q", a, b, k)
		}
	})
}
