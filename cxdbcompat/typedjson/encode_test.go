package typedjson

import (
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// tagOf returns the tag of a field name in allDesc.
func tagOf(t *testing.T, name string) uint64 {
	t.Helper()
	for tag, f := range allDesc.Fields {
		if f.Name == name {
			return tag
		}
	}
	t.Fatalf("no field %q", name)
	return 0
}

// oneField is the expected encoding of a one-field object: fixmap 1, the
// fixstr tag key, then the value bytes.
func oneField(t *testing.T, name, valueHex string) string {
	t.Helper()
	key := strconv.FormatUint(tagOf(t, name), 10)
	return "81" + hex.EncodeToString([]byte{0xa0 | byte(len(key))}) + hex.EncodeToString([]byte(key)) + valueHex
}

func TestEncodeTypes(t *testing.T) {
	ff := "ffffffffffffffff"
	tests := []struct {
		name, json, want string
	}{
		{"i64", `1`, "d30000000000000001"},
		{"i64", `-1`, "d3" + ff},
		{"i64", `"123"`, "d3000000000000007b"},
		{"i64", `"-5"`, "d3fffffffffffffffb"},
		{"i64", `9223372036854775807`, "d37fffffffffffffff"},
		{"i64", `1.0`, "d30000000000000001"},
		{"i64", `1e3`, "d300000000000003e8"},
		{"i64", `12.5e1`, "d3000000000000007d"},
		{"i64", `-0.0`, "d30000000000000000"},
		{"i64", `null`, "c0"},
		{"ums", `1700000000000`, "d30000018bcfe56800"},
		{"ums", `"2023-11-14T22:13:20+00:00"`, "d30000018bcfe56800"},
		{"tms", `"2023-11-14T22:13:20.123Z"`, "d30000018bcfe5687b"},
		{"tsms", `"2023-11-14T22:13:20.123+00:00"`, "d30000018bcfe5687b"},
		{"tsms", `"2023-11-15T00:13:20.1239+02:00"`, "d30000018bcfe5687b"},
		{"u64", `18446744073709551615`, "cf" + ff},
		{"u64", `"18446744073709551615"`, "cf" + ff},
		{"u64", `"9007199254740993"`, "cf0020000000000001"},
		{"u64", `0`, "cf0000000000000000"},
		{"uint64", `5`, "cf0000000000000005"},
		{"u32", `4294967295`, "ceffffffff"},
		{"uint32", `1`, "ce00000001"},
		{"i32", `-2147483648`, "d280000000"},
		{"i32", `5`, "d200000005"},
		{"u8", `255`, "ccff"},
		{"uint8", `0`, "cc00"},
		{"s", `"héllo"`, "a668c3a96c6c6f"},
		{"s", `""`, "a0"},
		{"b", `true`, "c3"},
		{"b", `false`, "c2"},
		{"bytes", `"AAEC"`, "c403000102"},
		{"blob", `""`, "c400"},
		{"bytes", `null`, "c0"},
		{"arr", `[1,"x",null,true,1.5,-200,18446744073709551615]`,
			"9701a178c0c3cb3ff8000000000000d1ff38cf" + ff},
		{"strs", `["a","b"]`, "92a161a162"},
		{"strs", `[]`, "90"},
		{"inner", `{"status":"done","name":"x","n":3}`, "83a131a178a132d30000000000000003a133cc02"},
		{"inners", `[{"name":"x"},null]`, "9281a131a178c0"},
		{"m", `{"b":1,"a":[2.5,"z"],"c":{"d":null}}`, "83a16192cb4004000000000000a17aa16201a16381a164c0"},
		{"m", `-40000`, "d2ffff63c0"},
		{"m", `1e2`, "cb4059000000000000"},
		{"st", `"running"`, "cc01"},
		{"st", `2`, "cc02"},
		{"st", `9`, "cc09"},
		{"st", `{"label":"done","value":7}`, "cc07"},
		{"st", `{"label":"done"}`, "cc02"},
		{"st", `{"value":7}`, "cc07"},
		{"st64", `"done"`, "cf0000000000000002"},
		{"st64", `"12"`, "cf000000000000000c"},
		{"stg", `"running"`, "01"},
		{"stg", `"free text"`, "a9667265652074657874"},
		{"stg", `{"label":"pending","value":0}`, "00"},
		{"nope", `{"x":1,"a":"b"}`, "82a161a162a17801"},
		{"refless", `{"k":1}`, "81a16b01"},
		{"u16", `70000`, "ce00011170"},
		{"u16", `5`, "05"},
		{"u8s", `[1,255]`, "92cc01ccff"},
		{"stmiss", `3`, "cc03"},
		{"deep", `[[1,[2]]]`, "9192019102"},
		{"self", `{"s":"x","self":{"u8":1}}`, "82a23132a178a2333081a23130cc01"},
		{"sts", `"done"`, "a4646f6e65"},
		{"big_tag", `"x"`, "a178"},
	}
	for _, tc := range tests {
		t.Run(tc.name+"="+tc.json, func(t *testing.T) {
			got, err := Encode([]byte(`{"`+tc.name+`":`+tc.json+`}`), allDesc, testTypes)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if want := oneField(t, tc.name, tc.want); hex.EncodeToString(got) != want {
				t.Fatalf("got  %x\nwant %s", got, want)
			}
		})
	}
}

func TestEncodeSortsByTag(t *testing.T) {
	a := `{"big_tag":"x","s":"y","u8":1,"i64":2,"m":{"b":1,"a":2},"inner":{"n":1,"name":"q"}}`
	b := `{"inner":{"name":"q","n":1},"m":{"a":2,"b":1},"i64":2,"u8":1,"s":"y","big_tag":"x"}`
	ga, err := Encode([]byte(a), allDesc, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := Encode([]byte(b), allDesc, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	if string(ga) != string(gb) {
		t.Fatalf("key order changed the bytes:\n%x\n%x", ga, gb)
	}
	// Tags 1, 10, 12, 18, 20, 100 in numeric (not string) order.
	want := "86" + "a131d30000000000000002" + "a23130cc01" + "a23132a179" +
		"a2313882a131a171a132d30000000000000001" + "a2323082a16102a16201" + "a3313030a178"
	if hex.EncodeToString(ga) != want {
		t.Fatalf("got  %x\nwant %s", ga, want)
	}
}

func TestEncodeFieldErrors(t *testing.T) {
	tests := []struct {
		json, path, msg string
	}{
		{`{"bogus":1}`, "bogus", "unknown field"},
		{`{"u8":1,"zz":1,"aa":2}`, "aa", "unknown field"},
		{`{"u64":-1}`, "u64", "out of range for u64"},
		{`{"u64":"-1"}`, "u64", "out of range for u64"},
		{`{"u64":18446744073709551616}`, "u64", "out of range for u64"},
		{`{"u64":"18446744073709551616"}`, "u64", "out of range for u64"},
		{`{"u64":"0x10"}`, "u64", "expected integer, got string"},
		{`{"u32":4294967296}`, "u32", "out of range for u32"},
		{`{"uint32":-1}`, "uint32", "out of range for uint32"},
		{`{"i32":2147483648}`, "i32", "out of range for int32"},
		{`{"u8":256}`, "u8", "out of range for u8"},
		{`{"uint8":-1}`, "uint8", "out of range for uint8"},
		{`{"i64":1.5}`, "i64", "must be an integer"},
		{`{"i64":1e-2}`, "i64", "must be an integer"},
		{`{"i64":15e-1}`, "i64", "must be an integer"},
		{`{"i64":9223372036854775808}`, "i64", "out of range for int64"},
		{`{"i64":1e400}`, "i64", "out of range for int64"},
		{`{"i64":1e99999999999999999999}`, "i64", "out of range for int64"},
		{`{"i64":"abc"}`, "i64", "expected integer, got string"},
		{`{"i64":[]}`, "i64", "expected integer, got array"},
		{`{"u32":"5"}`, "u32", "expected integer, got string"},
		{`{"b":"true"}`, "b", "expected boolean, got string"},
		{`{"b":1}`, "b", "expected boolean, got number"},
		{`{"s":1}`, "s", "expected string, got number"},
		{`{"bytes":"!!"}`, "bytes", "invalid base64"},
		{`{"bytes":"AAE"}`, "bytes", "invalid base64"},
		{`{"blob":{}}`, "blob", "expected base64 string, got object"},
		{`{"arr":{}}`, "arr", "expected array, got object"},
		{`{"inner":"x"}`, "inner", `expected object (type "test:Inner"), got string`},
		{`{"inner":{"bogus":1}}`, "inner.bogus", `unknown field for type "test:Inner"`},
		{`{"inners":[{},{},{"status":"nope"}]}`, "inners[2].status", `unknown label "nope" for enum "status"`},
		{`{"st":"nope"}`, "st", `unknown label "nope" for enum "status"`},
		{`{"stmiss":"x"}`, "stmiss", `unknown label "x" for enum "missing"`},
		{`{"st":{"label":"done","value":1}}`, "st", `label "done" does not match value 1`},
		{`{"st":{"label":"nope"}}`, "st", "unknown label"},
		{`{"st":{"label":1}}`, "st.label", "expected string, got number"},
		{`{"st":{"value":"x"}}`, "st.value", "expected integer, got string"},
		{`{"st":{"value":300}}`, "st", "out of range for u8"},
		{`{"st":{"value":1,"other":2}}`, "st", "expected integer, got object"},
		{`{"st":true}`, "st", "expected integer, got boolean"},
		{`{"ums":"yesterday"}`, "ums", "invalid time"},
		{`{"ums":true}`, "ums", "expected unix ms or RFC 3339 string, got boolean"},
		{`{"m":{"a":1e999}}`, "m.a", "number out of float64 range"},
		{`{"m":[100000000000000000000]}`, "m[0]", "integer out of 64-bit range"},
		{`{"strs":["a",1]}`, "strs[1]", "expected string, got number"},
		{`{"u8s":[1,256]}`, "u8s[1]", "out of range for u8"},
		{`{"self":{"self":{"bogus":1}}}`, "self.self.bogus", "unknown field"},
		{`{"self":{"inners":[{"name":"a"},{"n":0.5}]}}`, "self.inners[1].n", "must be an integer"},
	}
	for _, tc := range tests {
		t.Run(tc.json, func(t *testing.T) {
			_, err := Encode([]byte(tc.json), allDesc, testTypes)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want *FieldError", err)
			}
			if fe.Path != tc.path || !strings.Contains(fe.Msg, tc.msg) {
				t.Fatalf("got %q / %q, want %q / containing %q", fe.Path, fe.Msg, tc.path, tc.msg)
			}
			if fe.Error() != tc.path+": "+fe.Msg {
				t.Fatalf("Error() = %q", fe.Error())
			}
		})
	}
}

func TestEncodeNotObject(t *testing.T) {
	for _, in := range []string{``, `null`, `[]`, `1`, `"x"`, `true`, `{`, `{} {}`, `{}x`, `{"a":}`, `{}}`} {
		_, err := Encode([]byte(in), allDesc, testTypes)
		if !errors.Is(err, ErrNotObject) {
			t.Errorf("%q: err = %v, want ErrNotObject", in, err)
		}
	}
	if got, err := Encode([]byte(" {} \n"), allDesc, testTypes); err != nil || hex.EncodeToString(got) != "80" {
		t.Fatalf("empty object: %x, %v", got, err)
	}
}

func TestEncodeDepthLimit(t *testing.T) {
	nest := func(n int) string { // m's value holds n nested arrays
		return `{"m":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	}
	if _, err := Encode([]byte(nest(MaxDepth-1)), allDesc, testTypes); err != nil {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
	var fe *FieldError
	_, err := Encode([]byte(nest(MaxDepth)), allDesc, testTypes)
	if !errors.As(err, &fe) || !strings.Contains(fe.Msg, "nesting deeper than 64") {
		t.Fatalf("depth %d: err = %v", MaxDepth+1, err)
	}
	selfNest := strings.Repeat(`{"self":`, 100) + `{}` + strings.Repeat(`}`, 100)
	if _, err := Encode([]byte(selfNest), allDesc, testTypes); !errors.As(err, &fe) {
		t.Fatalf("recursive ref: err = %v", err)
	}
}

func TestEncodeNilTypes(t *testing.T) {
	// Without a registry, refs and enums are unknown: refs encode
	// generically and enum fields by their type only.
	got, err := Encode([]byte(`{"inner":{"b":1},"st":3}`), allDesc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "82a2313881a16201a23231cc03"; hex.EncodeToString(got) != want {
		t.Fatalf("got %x want %s", got, want)
	}
	if _, err := Encode([]byte(`{"st":"done"}`), allDesc, nil); err == nil {
		t.Fatal("label accepted without an enum")
	}
}
