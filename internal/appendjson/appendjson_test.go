package appendjson_test

import (
	"encoding/json"
	"testing"

	"github.com/cardboxhq/cardbox/internal/appendjson"
)

// String and Compact append what encoding/json.Marshal appends for the
// same string or json.RawMessage, byte for byte.
func TestSameBytesAsEncodingJSON(t *testing.T) {
	strs := []string{
		"", "plain", `quote " backslash \ slash /`, "tab\t nl\n cr\r bs\b ff\f nul\x00 us\x1f del\x7f",
		"<script>&amp;</script>", "é ü 日本 😀", "line\u2028sep\u2029", "replacement \ufffd kept",
		"invalid \xff\xfe utf-8", "cut \xe2\x80", "\xe2\x80\xa8", "a\u2028", "&",
	}
	for _, s := range strs {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendjson.String([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("String(%q) = %s, want %s", s, got[1:], want)
		}
	}
	raws := []string{
		// jsonb's text output, as Postgres writes it
		`{"a": 1, "bb": [1.0, 1000, -0.5, 1.5e+300], "ccc": {"x": null, "y": true, "z": false}}`,
		`[]`, `{}`, `[{}, [], ""]`, `"just a string"`, `12`, `null`, `true`,
		`{"s": "a: b, c", "t": "\"quoted\": ,", "u": "back\\slash\\", "v": "\\\""}`,
		`{"html": "<b>&</b>", "sep": "x` + "\u2028" + `y` + "\u2029" + `", "esc": "\u0001\n\t\\u003c"}`,
		`{"uni": "é 日本 😀 \ufffd"}`,
		`{"near": "€ ‐ ‧ ‰ \u2028", "end": "` + "\u2029" + `"}`,
		// any valid JSON's whitespace
		" \t\n{ \"a\" :\r\n [ 1 ,\t2 ] , \"b\":\"  \" }\n ",
	}
	for _, r := range raws {
		if !json.Valid([]byte(r)) {
			t.Fatalf("test input %q is not JSON", r)
		}
		want, err := json.Marshal(json.RawMessage(r))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendjson.Compact([]byte("x"), json.RawMessage(r)); string(got) != "x"+string(want) {
			t.Errorf("Compact(%s)\n got %s\nwant %s", r, got[1:], want)
		}
	}
	if got := appendjson.Compact(nil, nil); string(got) != "null" {
		t.Errorf("Compact(nil) = %s, want null", got)
	}
}

// BenchmarkCompact measures Compact on a card's content as jsonb writes
// it, beside a plain copy (what appending it as it is costs).
func BenchmarkCompact(b *testing.B) {
	raw := json.RawMessage(`{"text": "Summarise the thread and list the open questions, with owners and dates.", "refs": [{"kind": "doc", "id": "d-1024", "score": 0.87}, {"kind": "msg", "id": "m-77", "score": 0.5}], "lang": "en"}`)
	buf := make([]byte, 0, 2*len(raw))
	b.Run("compact", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			buf = appendjson.Compact(buf[:0], raw)
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			buf = appendjson.Raw(buf[:0], raw)
		}
	})
}

// stringCases are strings whose escaping differs: every escape String
// writes, multi-byte runes kept, and invalid UTF-8.
var stringCases = []string{
	"", "plain", `quote " backslash \ slash /`, "tab\t nl\n cr\r bs\b ff\f nul\x00 us\x1f del\x7f",
	"<script>&amp;</script>", "é ü 日本 😀", "line\u2028sep\u2029", "replacement \ufffd kept",
	"invalid \xff\xfe utf-8", "cut \xe2\x80", "\xe2\x80\xa8", "a\u2028", "&", "\x01\x02\x0b\x0e\x1b",
	"surrogate half \xed\xa0\x80", "overlong \xc0\xaf", "4-byte cut \xf0\x9f\x98",
}

// checkStringLen fails unless StringLen(s) is the length of what String
// appends and of what encoding/json.Marshal writes.
func checkStringLen(t *testing.T, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got := appendjson.String(nil, s)
	if string(got) != string(want) {
		t.Fatalf("String(%q) = %s, encoding/json writes %s", s, got, want)
	}
	if n := appendjson.StringLen(s); n != len(got) {
		t.Fatalf("StringLen(%q) = %d, String appends %d bytes: %s", s, n, len(got), got)
	}
}

func TestStringLenIsWhatStringAppends(t *testing.T) {
	for _, s := range stringCases {
		checkStringLen(t, s)
	}
	for c := range 256 { // every byte alone, as ASCII or as invalid UTF-8
		checkStringLen(t, string([]byte{byte(c)}))
	}
}

func FuzzStringLen(f *testing.F) {
	for _, s := range stringCases {
		f.Add(s)
	}
	f.Fuzz(checkStringLen)
}
