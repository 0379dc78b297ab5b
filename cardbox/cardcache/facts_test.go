package cardcache

import (
	"slices"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cardbox/layout"
)

// TestFactRoundTrip: a card's facts read back as cached, under each
// tokenizer, only at the stamp they were cached with and before the
// card's expiry.
func TestFactRoundTrip(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := New(1 << 20)
	for _, tt := range []struct {
		name    string
		facts   Facts
		expires int64
	}{
		{"plain", Facts{Zone: layout.ZoneWorking, Tokens: []int32{12, -1}}, 0},
		{"tool calls", Facts{Zone: layout.ZonePermanent, Tokens: []int32{3, 4}, ToolCallID: "call-0", ToolCallIDs: []string{"call-1", "", "call-é"}}, now.Add(time.Hour).UnixMicro()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c.PutFacts("p", tt.name, 42, 7, &tt.facts, tt.expires)
			for tokenizer, want := range tt.facts.Tokens {
				f, ok := c.Fact("p", tt.name, 7, now, tokenizer)
				if !ok || f.Zone != tt.facts.Zone || f.Tokens != want || f.Version != 42 || f.Expires != tt.expires ||
					f.ToolCallID != tt.facts.ToolCallID || !slices.Equal(f.ToolCallIDs, tt.facts.ToolCallIDs) {
					t.Fatalf("tokenizer %d: %+v, %v", tokenizer, f, ok)
				}
			}
			if f, ok := c.Fact("p", tt.name, 7, now, len(tt.facts.Tokens)); !ok || f.Tokens != -1 {
				t.Errorf("a tokenizer without a count: %+v, %v", f, ok)
			}
			if _, ok := c.Fact("p", tt.name, 8, now, 0); ok {
				t.Error("served at another stamp")
			}
			if _, ok := c.Fact("p", tt.name, 7, now.Add(2*time.Hour), 0); ok && tt.expires != 0 {
				t.Error("served after the card expired")
			}
		})
	}
}
