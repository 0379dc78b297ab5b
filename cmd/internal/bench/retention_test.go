package bench

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/ctxmeta"
)

// The first turns of the seeded contexts carry the label where the
// server reads context metadata, and each is unique (the server would
// deduplicate a repeated payload).
func TestSeededFirstTurnsCarryTheLabel(t *testing.T) {
	g := firstTurnGen{label: "bench-retention", text: "some words"}
	a, b := g.next(), g.next()
	if string(a) == string(b) {
		t.Fatal("two first turns are the same payload")
	}
	for _, p := range [][]byte{a, b} {
		m, ok := ctxmeta.Extract(p)
		if !ok || !slices.Equal(m.Labels, []string{"bench-retention"}) {
			t.Fatalf("metadata %+v, %v; want the label", m, ok)
		}
	}
}

// The CPU of a process tree counts this process as its root, and nothing
// for no root.
func TestTreeCPU(t *testing.T) {
	for _, tc := range []struct {
		name string
		root int
		some bool
	}{
		{"this process", os.Getpid(), true},
		{"no root", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// /proc counts CPU in ticks of 10 ms: spend a few first.
			for tc.some && selfCPU() < 50*time.Millisecond {
			}
			if got := treeCPU(tc.root); (got > 0) != tc.some {
				t.Fatalf("treeCPU(%d) = %v, want some: %v", tc.root, got, tc.some)
			}
		})
	}
	if ppid := parentPID(os.Getpid()); ppid != os.Getppid() {
		t.Fatalf("parentPID = %d, want %d", ppid, os.Getppid())
	}
}
