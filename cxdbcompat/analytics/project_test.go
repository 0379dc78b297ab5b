package analytics_test

import (
	"encoding/hex"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/analytics"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCleanJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":"x"}`, `{"a":"x"}`},
		{`{"a":"x\u0000y"}`, `{"a":"x\ufffdy"}`},
		{`{"\u0000":"\u0000\u0000"}`, `{"\ufffd":"\ufffd\ufffd"}`},
		{`{"a":"\\u0000"}`, `{"a":"\\u0000"}`},             // an escaped backslash, then text
		{`{"a":"\\\u0000"}`, `{"a":"\\\ufffd"}`},           // an escaped backslash, then a NUL
		{"{\"a\":\"x\xff\xfey\"}", "{\"a\":\"x\uFFFDy\"}"}, // one U+FFFD per run
		{`{"a":"\u00001"}`, `{"a":"\ufffd1"}`},
	} {
		if got := string(analytics.CleanJSON([]byte(tc.in))); got != tc.want {
			t.Errorf("CleanJSON(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
