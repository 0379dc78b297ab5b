package service

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/ctxmeta"
)

// Entries are sized never below their JSON: escapes, invalid UTF-8 and
// line separators included.
func TestEntrySizesAreAtLeastTheirJSON(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " and \ backslash`, "\b\f\n\r\t", "\x00\x01\x1f\x7f", "<a href='x'>&amp;</a>",
		"caf\u00e9 \u65e5\u672c \U0001F600", "\xff\xfe bad \xc3", "line\u2028para\u2029", strings.Repeat("<\x00é", 1000),
	} {
		who := s
		e := ContextEntry{
			ContextID: "18446744073709551615", HeadTurnID: "18446744073709551615", HeadDepth: 1<<32 - 1,
			CreatedAtMs: -1 << 63, UpdatedAtMs: -1 << 63, IsLive: true, ClientTag: s, SessionID: "18446744073709551615",
			LastActivityAt: -1 << 63, Title: s, Labels: []string{s, s}, Provenance: &ctxmeta.Provenance{OnBehalfOf: &who},
		}
		if b, _ := json.Marshal(e); e.size() < len(b)+1 {
			t.Errorf("ContextEntry of %q sized %d, JSON is %d bytes", s, e.size(), len(b))
		}
		se := SearchEntry{ContextID: e.ContextID, HeadTurnID: e.HeadTurnID, HeadDepth: e.HeadDepth,
			CreatedAtMs: e.CreatedAtMs, IsLive: true, ClientTag: s, Title: s}
		if b, _ := json.Marshal(se); se.size() < len(b)+1 {
			t.Errorf("SearchEntry of %q sized %d, JSON is %d bytes", s, se.size(), len(b))
		}
	}
}
