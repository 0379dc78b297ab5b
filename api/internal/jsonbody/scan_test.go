package jsonbody

import (
	"encoding/json"
	"slices"
	"testing"
)

// ScanIDList must agree with encoding/json on every body it accepts.
func checkScanIDList(t *testing.T, body string) (accepted bool) {
	t.Helper()
	ids, ok := ScanIDList([]byte(body), "card_ids")
	if !ok {
		return false
	}
	var want struct {
		CardIDs []string `json:"card_ids"`
	}
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		t.Fatalf("%q: scanned %q, but encoding/json fails: %v", body, ids, err)
	}
	if !slices.Equal(ids, want.CardIDs) || (ids == nil) != (want.CardIDs == nil) {
		t.Fatalf("%q: scanned %#v, encoding/json %#v", body, ids, want.CardIDs)
	}
	return true
}

var scanIDListSeeds = []struct {
	body   string
	accept bool
}{
	{`{"card_ids":["a","b"]}`, true},
	{" \n{ \"card_ids\" :\t[ \"a\" , \"b-1_x.y\" ] }\r\n", true},
	{`{"card_ids":[]}`, true},
	{`{"card_ids":["a","a"]}`, true},
	{`{"card_ids":[""]}`, true},
	{`{"card_ids":null}`, false},
	{`{}`, false},
	{`{"CARD_IDS":["a"]}`, false},
	{`{"card_ids":["a"],"x":1}`, false},
	{`{"card_ids":["a\u0062"]}`, false},
	{`{"card_ids":["a\"b"]}`, false},
	{`{"card_ids":["é"]}`, false},
	{"{\"card_ids\":[\"a\x01\"]}", false},
	{`{"card_ids":["a",]}`, false},
	{`{"card_ids":[,"a"]}`, false},
	{`{"card_ids":["a" "b"]}`, false},
	{`{"card_ids":["a"]} x`, false},
	{`{"card_ids":["a"]`, false},
	{`{"card_ids":[1]}`, false},
	{`["a"]`, false},
}

func TestScanIDList(t *testing.T) {
	for _, s := range scanIDListSeeds {
		if got := checkScanIDList(t, s.body); got != s.accept {
			t.Errorf("%q: accepted %v, want %v", s.body, got, s.accept)
		}
	}
}

func FuzzScanIDList(f *testing.F) {
	for _, s := range scanIDListSeeds {
		f.Add(s.body)
	}
	f.Fuzz(func(t *testing.T, body string) { checkScanIDList(t, body) })
}
