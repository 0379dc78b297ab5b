package ctxmeta

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzExtract feeds untrusted bytes to Extract: it must not panic, every
// string it returns must be valid UTF-8 without NUL, and the result must
// marshal to JSON (a provenance with all 25 keys).
func FuzzExtract(f *testing.F) {
	f.Add(pack(f, goItem{ItemType: "user_input", ContextMetadata: &goContextMetadata{
		ClientTag: "tag", Labels: []string{"a"}, Provenance: &fullGoProvenance}}))
	f.Add(pack(f, mp(30, mp(1, "a\x00\xff", 3, []any{"x", 1}, 10, mp(1, -1, 60, mp("k", "v", 1, 2))))))
	f.Add([]byte{0x82, 0x01, 0x91, 0x91, 0xc0, 0x1e, 0x81, 0x01, 0xa1, 'a'})
	f.Add([]byte{0x81, 0xa2, '3', '0', 0x81, 0xa1, '2', 0xdb, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, payload []byte) {
		m, ok := Extract(payload)
		if !ok {
			if m.found() {
				t.Fatalf("not ok but metadata %+v", m)
			}
			return
		}
		for _, s := range metadataStrings(m) {
			if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
				t.Fatalf("unclean string %q", s)
			}
		}
		if _, err := json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		if m.Provenance != nil {
			b, err := json.Marshal(m.Provenance)
			if err != nil || len(jsonKeys(t, b)) != len(provFields) {
				t.Fatalf("provenance json %s, %v", b, err)
			}
		}
	})
}

// metadataStrings lists every string in m.
func metadataStrings(m Metadata) []string {
	out := append([]string(nil), m.Labels...)
	for _, s := range []*string{m.ClientTag, m.Title} {
		if s != nil {
			out = append(out, *s)
		}
	}
	if p := m.Provenance; p != nil {
		for _, f := range provFields {
			switch v := f.ptr(p).(type) {
			case **string:
				if *v != nil {
					out = append(out, **v)
				}
			case *map[string]string:
				for k, val := range *v {
					out = append(out, k, val)
				}
			}
		}
	}
	return out
}
