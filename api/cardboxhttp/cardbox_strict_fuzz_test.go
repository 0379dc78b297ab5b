package cardboxhttp

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cardboxhq/cardbox/api/internal/jsonbody"
)

// FuzzCheckBody holds checkBody to its promise: whatever the body, it
// does not panic, and a body it accepts that encoding/json decodes holds
// only strings Postgres stores as sent: valid UTF-8, no NUL, no U+FFFD it
// did not spell out.
func FuzzCheckBody(f *testing.F) {
	for _, seed := range []string{
		`{"card_id":"a","content":{"x":[1,2.5e3,"\ud83d\ude00"]},"metadata":{"type":"task.instruction"}}`,
		`{"cards":[{"card_id":"a","metadata":{"type":"t.x","role":"user"}}]}`,
		`{"card_id":"a\u0000"}`, "{\"card_id\":\"\xff\"}", `{"card_id":"\udc00"}`,
		`{"contnet":1}`, `{"card_id":"a","card_id":"b"}`, `[{"a":}`, `{"content":1e999999}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var req addCardsRequest
		if jsonbody.Check([]byte(body), &req) != nil {
			return
		}
		if json.Unmarshal([]byte(body), &req) != nil {
			return // a syntax error, which encoding/json reports
		}
		if !utf8.ValidString(body) {
			t.Fatalf("accepted invalid UTF-8: %q", body)
		}
		var v any
		dec := json.NewDecoder(strings.NewReader(body))
		dec.UseNumber() // numbers beyond float64 are fine: Postgres's numeric holds them
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("decodes as a request but not as a value: %v", err)
		}
		checkStored(t, v, body)
	})
}

// checkStored fails on a NUL or U+FFFD that the body did not spell out.
func checkStored(t *testing.T, v any, body string) {
	t.Helper()
	check := func(s string) {
		if strings.ContainsRune(s, 0) {
			t.Fatalf("accepted a NUL: %q", body)
		}
		if strings.ContainsRune(s, utf8.RuneError) && !strings.Contains(body, "\ufffd") && !strings.Contains(strings.ToLower(body), `\ufffd`) {
			t.Fatalf("accepted a string that decodes to U+FFFD: %q", body)
		}
	}
	switch v := v.(type) {
	case string:
		check(v)
	case []any:
		for _, e := range v {
			checkStored(t, e, body)
		}
	case map[string]any:
		for k, e := range v {
			check(k)
			checkStored(t, e, body)
		}
	}
}
