package bench

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestPayloadsAreDistinctMsgpackOfTheRequestedSize(t *testing.T) {
	a, b := newPayloadGen(1024, 1), newPayloadGen(1024, 2)
	seen := map[string]bool{}
	for range 100 {
		for _, g := range []*payloadGen{a, b} {
			p := g.next()
			if seen[string(p)] {
				t.Fatal("repeated payload")
			}
			seen[string(p)] = true
			if len(p) < 900 || len(p) > 1100 {
				t.Fatalf("payload of %d bytes, want about 1024", len(p))
			}
			var m map[string]any
			if err := msgpack.Unmarshal(p, &m); err != nil || m["1"] != "user_input" {
				t.Fatalf("not a conversation item: %v %v", m, err)
			}
		}
	}
	if bytes.Equal(a.template, b.template) {
		t.Fatal("generators share a template")
	}
}

func TestRunsDoNotRepeatPayloads(t *testing.T) {
	first, second := newPayloadGen(1024, 7), newPayloadGen(1024, 7) // the same connection in two runs
	seen := map[string]bool{}
	for range 1000 {
		seen[string(first.next())] = true
	}
	for range 1000 {
		if seen[string(second.next())] {
			t.Fatal("a second run repeats a payload of the first: the server would deduplicate it")
		}
	}
}

// The flush probe times one file and two flushed in parallel.
func TestFdatasyncProbe(t *testing.T) {
	for _, n := range []int{1, 2} {
		ms, err := fdatasyncMs(t.TempDir(), n)
		if err != nil || ms < 0 {
			t.Errorf("%d files: %v ms, %v", n, ms, err)
		}
	}
}
