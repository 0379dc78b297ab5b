package main

import (
	"math/rand/v2"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/analytics"
	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// Every item the sample writes projects through the conversation bundle
// without error, as the typed view and SQL analytics will show it.
func TestSampleItemsProject(t *testing.T) {
	reg, _, err := registry.Empty().Apply(registry.ConversationBundle)
	if err != nil {
		t.Fatal(err)
	}
	w := &sampleWriter{rng: rand.New(rand.NewPCG(1, 2))}
	items := []map[string]any{firstItem(0)}
	for i := range 200 {
		items = append(items, w.exchange(i)...)
	}
	kinds := map[string]bool{}
	for _, item := range items {
		item["3"] = int64(1700000000000)
		payload, err := w.encode(item)
		if err != nil {
			t.Fatal(err)
		}
		p := analytics.Project(reg, "cxdb.ConversationItem", 3, payload)
		if p.Skipped != "" {
			t.Fatalf("%v: skipped %s", item, p.Skipped)
		}
		kinds[item["1"].(string)] = true
	}
	for _, k := range []string{"user_input", "assistant_turn", "tool_call", "tool_result", "system", "handoff"} {
		if !kinds[k] {
			t.Errorf("the sample wrote no %s item", k)
		}
	}
}
