package appendjson_test

import (
	"encoding/json"
	"testing"

	"github.com/cardboxhq/cardbox/cardbox/appendjson"
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
