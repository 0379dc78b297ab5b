package typedjson

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat/msgpackread"
)

// FuzzEncode checks that Encode never panics, fails only with ErrNotObject
// or a *FieldError, is deterministic, and that every success decodes as one
// msgpack map with nothing after it, read as projection reads payloads.
func FuzzEncode(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `null`, `{"u64":"18446744073709551615","i64":-1,"ums":"2023-11-14T22:13:20Z"}`,
		`{"inner":{"status":"done"},"inners":[{"name":"x","n":1e3}],"st":{"label":"done","value":7}}`,
		`{"m":{"a":[1,2.5,"x",null,true,{"b":{}}]},"arr":[1e400],"bytes":"AAEC","b":true}`,
		`{"self":{"self":{"self":{"u8s":[1,2,255]}}},"deep":[[[[]]]]}`,
		`{"u32":4294967295,"i32":-1,"uint8":1.0,"u16":70000,"stg":"free","refless":{"k":[]}}`,
		`{"i64":1e99999999999999999999,"u64":-0.0e-5}`,
		canonicalJSON,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Encode(data, allDesc, testTypes)
		if err != nil {
			var fe *FieldError
			if !errors.Is(err, ErrNotObject) && !errors.As(err, &fe) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			return
		}
		again, err := Encode(data, allDesc, testTypes)
		if err != nil || !bytes.Equal(out, again) {
			t.Fatalf("not deterministic: %x vs %x (%v)", out, again, err)
		}
		r := msgpackread.NewReader(out, MaxDepth)
		h, err := r.Head(0)
		if err == nil {
			err = r.Skip(h, 0)
		}
		if err != nil || h.Kind != msgpackread.Map || r.Len() != 0 {
			t.Fatalf("output %x is not one msgpack map: a %s, %v, %d bytes after it", out, h.Kind, err, r.Len())
		}
	})
}
