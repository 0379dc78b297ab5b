package registry

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/internal/testkit"
)

func TestParseMalformed(t *testing.T) {
	const f = `"1":{"name":"a","type":"string"}`
	cases := []struct {
		name, body, msg, path string
	}{
		{"not json", `{"registry_version":1,`, "invalid json: unexpected end of JSON input", ""},
		{"trailing garbage", `{"registry_version":1,"bundle_id":"b"} x`, "invalid json: invalid character 'x'", ""},
		{"top-level array", `[]`, "invalid json: expected an object, got an array", ""},
		{"top-level null", `null`, "invalid json: expected an object, got null", ""},
		{"missing registry_version", `{"bundle_id":"b"}`, "invalid json: missing registry_version", ""},
		{"null registry_version", `{"registry_version":null,"bundle_id":"b"}`, "invalid json: missing registry_version", ""},
		{"registry_version 0", `{"registry_version":0,"bundle_id":"b"}`, "registry_version must be > 0", "registry_version"},
		{"registry_version negative", `{"registry_version":-1,"bundle_id":"b"}`, "invalid json: registry_version: expected an unsigned 32-bit integer, got -1", "registry_version"},
		{"registry_version too big", `{"registry_version":4294967296,"bundle_id":"b"}`, "got 4294967296", "registry_version"},
		{"registry_version float", `{"registry_version":1.5,"bundle_id":"b"}`, "got 1.5", "registry_version"},
		{"registry_version string", `{"registry_version":"1","bundle_id":"b"}`, `got "1"`, "registry_version"},
		{"missing bundle_id", `{"registry_version":1}`, "invalid json: missing bundle_id", ""},
		{"bundle_id number", `{"registry_version":1,"bundle_id":7}`, "invalid json: bundle_id: expected a string, got a number", "bundle_id"},
		{"empty bundle_id", `{"registry_version":1,"bundle_id":""}`, "invalid json: bundle_id: must not be empty", "bundle_id"},
		{"types array", `{"registry_version":1,"bundle_id":"b","types":[]}`, "invalid json: types: expected an object, got an array", "types"},
		{"type not object", `{"registry_version":1,"bundle_id":"b","types":{"T":1}}`, `invalid json: types["T"]: expected an object, got a number`, `types["T"]`},
		{"versions array", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":[]}}}`, `types["T"].versions: expected an object, got an array`, `types["T"].versions`},
		{"version key word", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"v1":{}}}}}`, `invalid type version "v1" at types["T"].versions`, `types["T"].versions`},
		{"version key negative", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"-1":{}}}}}`, `invalid type version "-1"`, `types["T"].versions`},
		{"version key over u32", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"4294967296":{}}}}}`, `invalid type version "4294967296"`, `types["T"].versions`},
		{"version key twice", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"7":{},"007":{}}}}}`, `keys "007" and "7" are both version 7`, `types["T"].versions`},
		{"version not object", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":"x"}}}}`, `types["T"].versions["1"]: expected an object, got a string`, `types["T"].versions["1"]`},
		{"fields array", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"fields":[]}}}}}`, `types["T"].versions["1"].fields: expected an object, got an array`, `types["T"].versions["1"].fields`},
		{"tag word", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"fields":{"x":{}}}}}}}`, `invalid field tag "x" at types["T"].versions["1"].fields`, `types["T"].versions["1"].fields`},
		{"tag over u64", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"fields":{"18446744073709551616":{}}}}}}}`, `invalid field tag "18446744073709551616"`, `types["T"].versions["1"].fields`},
		{"tag twice", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"fields":{` + f + `,"01":{"name":"a","type":"string"}}}}}}}`, `keys "01" and "1" are both tag 1`, `types["T"].versions["1"].fields`},
		{"field null", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"fields":{"1":null}}}}}}`, `fields["1"]: expected an object, got null`, `types["T"].versions["1"].fields["1"]`},
		{"missing name", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"fields":{"1":{"type":"string"}}}}}}}`, `invalid json: types["T"].versions["1"].fields["1"]: missing name`, `types["T"].versions["1"].fields["1"]`},
		{"missing type", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"fields":{"1":{"name":"a"}}}}}}}`, `fields["1"]: missing type`, `types["T"].versions["1"].fields["1"]`},
		{"type number", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"fields":{"1":{"name":"a","type":3}}}}}}}`, `fields["1"].type: expected a string, got a number`, `types["T"].versions["1"].fields["1"].type`},
		{"enum number", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"fields":{"1":{"name":"a","type":"u8","enum":1}}}}}}}`, `fields["1"].enum: expected a string`, `types["T"].versions["1"].fields["1"].enum`},
		{"optional string", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"fields":{"1":{"name":"a","type":"u8","optional":"yes"}}}}}}}`, `fields["1"].optional: expected a boolean, got a string`, `types["T"].versions["1"].fields["1"].optional`},
		{"renderer without esm_url", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"renderer":{"component":"X"}}}}}}`, `types["T"].versions["1"].renderer: missing esm_url`, `types["T"].versions["1"].renderer`},
		{"renderer array", `{"registry_version":1,"bundle_id":"b","types":{"T":{"versions":{"1":{"renderer":[]}}}}}`, `renderer: expected an object, got an array`, `types["T"].versions["1"].renderer`},
		{"enums array", `{"registry_version":1,"bundle_id":"b","enums":[]}`, `invalid json: enums: expected an object, got an array`, "enums"},
		{"enum labels array", `{"registry_version":1,"bundle_id":"b","enums":{"E":[]}}`, `enums["E"]: expected an object, got an array`, `enums["E"]`},
		{"enum label number", `{"registry_version":1,"bundle_id":"b","enums":{"E":{"1":2}}}`, `enums["E"]: labels must be strings`, `enums["E"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.body))
			checkErr(t, err, ErrMalformed, c.msg)
			var e *Error
			if errors.As(err, &e) && e.Path != c.path {
				t.Errorf("path = %q, want %q", e.Path, c.path)
			}
		})
	}
}

// checkErr asserts err's kind and that its message contains msg.
func checkErr(t *testing.T, err, kind error, msg string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("err = %v, want kind %v", err, kind)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err %T is not *Error", err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("message %q does not contain %q", err.Error(), msg)
	}
}

func TestParseNormalises(t *testing.T) {
	body := `{"registry_version":2,"bundle_id":"b","description":"ignored","types":{
		"T":{"description":"x","versions":{"007":{"nested":1,"fields":{
			"1":{"name":"s","type":"string","semantic":"enum","required":true},
			"2":{"name":"a","type":"array","items":"string"},
			"3":{"name":"r","type":"array","items":{"type":"ref","ref":"U"}},
			"4":{"name":"o","type":"array","items":{"type":"u64","ref":"ignored"}},
			"5":{"name":"n","type":"array","items":{"type":"ref"}},
			"6":{"name":"k","type":"array","items":{"type":5}},
			"7":{"name":"z","type":"array","items":7},
			"8":{"name":"e","type":"u8","enum":"E","ref":null,"optional":true},
			"018446744073709551615":{"name":"max","type":"ref","ref":"U","items":null,"optional":null}
		},"renderer":{"esm_url":"builtin:X","component":null,"integrity":"sha384-x","extra":1}}}},
		"Empty":{"versions":{}}, "Nothing":{}},
		"enums":{"E":{"1":"one","x":"y"},"Blank":null}}`
	b, err := Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if b.RegistryVersion != 2 || b.BundleID != "b" {
		t.Errorf("header = %d %q", b.RegistryVersion, b.BundleID)
	}
	if len(b.Types) != 1 {
		t.Errorf("types without versions must be dropped: %v", b.Types)
	}
	d := b.Types["T"][7]
	want := map[uint64]Field{
		1:          {Name: "s", Type: "string"},
		2:          {Name: "a", Type: "array", Items: &Items{Type: "string"}},
		3:          {Name: "r", Type: "array", Items: &Items{Type: "ref", Ref: "U"}},
		4:          {Name: "o", Type: "array", Items: &Items{Type: "u64"}},
		5:          {Name: "n", Type: "array"},
		6:          {Name: "k", Type: "array"},
		7:          {Name: "z", Type: "array"},
		8:          {Name: "e", Type: "u8", Enum: "E", Optional: true},
		^uint64(0): {Name: "max", Type: "ref", Ref: "U"},
	}
	if d.TypeID != "T" || d.Version != 7 || !reflect.DeepEqual(d.Fields, want) {
		t.Errorf("descriptor = %+v", d)
	}
	if *d.Renderer != (Renderer{ESMURL: "builtin:X", Integrity: "sha384-x"}) {
		t.Errorf("renderer = %+v", d.Renderer)
	}
	wantEnums := map[string]map[string]string{"E": {"1": "one", "x": "y"}, "Blank": {}}
	if !reflect.DeepEqual(b.Enums, wantEnums) {
		t.Errorf("enums = %v", b.Enums)
	}
}

func TestParseMinimal(t *testing.T) {
	b, err := Parse([]byte(`{"registry_version":1,"bundle_id":"only"}`))
	if err != nil || len(b.Types) != 0 || len(b.Enums) != 0 {
		t.Fatalf("Parse = %+v, %v", b, err)
	}
}

func TestApplyRules(t *testing.T) {
	const (
		str  = `"1":{"name":"a","type":"string"}`
		str2 = `"1":{"name":"renamed","type":"string","optional":true,"items":"x"}`
		u64  = `"1":{"name":"a","type":"u64"}`
		en   = `"1":{"name":"a","type":"string","enum":"E"}`
	)
	base := [][]byte{
		bundle("base", typ("T", 2, str), `"E":{"1":"one"}`),
	}
	cases := []struct {
		name    string
		prior   [][]byte
		body    []byte
		created bool
		kind    error // nil: accepted
		msg     string
		details map[string]any
	}{
		{"new type", base, bundle("n", typ("U", 1, str), ""), true, nil, "", nil},
		{"new higher version, renamed field", base, bundle("n", typ("T", 3, str2), ""), true, nil, "", nil},
		{"new higher version, tags removed", base, bundle("n", typ("T", 9, ""), ""), true, nil, "", nil},
		{"identical version again, other id", base, bundle("n", typ("T", 2, str), `"E":{"1":"one"}`), true, nil, "", nil},
		{"identical republish", base, base[0], false, nil, "", nil},
		{"same id, other bytes", base, bundle("base", typ("T", 2, str)+" ", `"E":{"1":"one"}`), false, ErrConflict,
			"bundle_id already exists with different content", map[string]any{"bundle_id": "base"}},
		{"same id, whitespace only", base, append([]byte(" "), base[0]...), false, ErrConflict,
			"bundle_id already exists with different content", map[string]any{"bundle_id": "base"}},
		{"version redefined", base, bundle("n", typ("T", 2, u64), ""), false, ErrConflict,
			"type T version 2 differs from existing", map[string]any{"bundle_id": "n", "type_id": "T", "version": uint32(2)}},
		{"version redefined by rename", base, bundle("n", typ("T", 2, str2), ""), false, ErrConflict,
			"type T version 2 differs from existing", map[string]any{"bundle_id": "n", "type_id": "T", "version": uint32(2)}},
		{"version redefined by dropping a tag", base, bundle("n", typ("T", 2, ""), ""), false, ErrConflict,
			"type T version 2 differs from existing", map[string]any{"bundle_id": "n", "type_id": "T", "version": uint32(2)}},
		{"version going back", base, bundle("n", typ("T", 1, str), ""), false, ErrConflict,
			"type T version 1 is below its latest version 2",
			map[string]any{"bundle_id": "n", "type_id": "T", "version": uint32(1), "latest_version": uint32(2)}},
		{"tag retyped", base, bundle("n", typ("T", 3, u64), ""), false, ErrConflict,
			"tag reuse conflict for type T tag 1",
			map[string]any{"bundle_id": "n", "type_id": "T", "version": uint32(3), "tag": uint64(1)}},
		{"tag given an enum", base, bundle("n", typ("T", 3, en), ""), false, ErrConflict,
			"tag reuse conflict for type T tag 1",
			map[string]any{"bundle_id": "n", "type_id": "T", "version": uint32(3), "tag": uint64(1)}},
		{"tag conflict inside one bundle", nil,
			bundle("n", `"T":{"versions":{"1":{"fields":{`+str+`}},"2":{"fields":{`+u64+`}}}}`, ""), false, ErrConflict,
			"tag reuse conflict for type T tag 1",
			map[string]any{"bundle_id": "n", "type_id": "T", "version": uint32(2), "tag": uint64(1)}},
		{"tag of a removed version still recorded", [][]byte{base[0], bundle("b2", typ("T", 3, ""), "")},
			bundle("n", typ("T", 4, u64), ""), false, ErrConflict, "tag reuse conflict for type T tag 1", nil},
		{"enum remapped", base, bundle("n", "", `"E":{"1":"uno"}`), false, ErrConflict,
			"enum E already exists with different mapping", map[string]any{"bundle_id": "n", "enum_id": "E"}},
		{"enum extended", base, bundle("n", "", `"E":{"1":"one","2":"two"}`), false, ErrConflict,
			"enum E already exists with different mapping", nil},
		{"enum repeated identically", base, bundle("n", "", `"E":{"1":"one"}`), true, nil, "", nil},
		{"enum known before", base, bundle("n", typ("V", 1, en), ""), true, nil, "", nil},
		{"enum in same bundle", nil, bundle("n", typ("V", 1, en), `"E":{"0":"zero"}`), true, nil, "", nil},
		{"enum missing", base, bundle("n", typ("V", 1, `"1":{"name":"a","type":"u8","enum":"Nope"}`), ""), false, ErrMalformed,
			"missing enum Nope for type V version 1 tag 1",
			map[string]any{"bundle_id": "n", "type_id": "V", "version": uint32(1), "tag": uint64(1), "enum_id": "Nope"}},
		{"malformed", base, []byte(`{"bundle_id":"n"}`), false, ErrMalformed, "invalid json: missing registry_version", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mustApply(t, Empty(), c.prior...)
			before := dump(t, r)
			next, created, err := r.Apply(c.body)
			if dump(t, r) != before {
				t.Error("Apply changed its receiver")
			}
			if created != c.created {
				t.Errorf("created = %v, want %v", created, c.created)
			}
			if c.kind == nil {
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if !created && next != r {
					t.Error("a republish must return the receiver")
				}
				return
			}
			checkErr(t, err, c.kind, c.msg)
			if next != r {
				t.Error("a refused bundle must return the receiver")
			}
			if c.details != nil {
				var e *Error
				errors.As(err, &e)
				if got := e.Details(); !reflect.DeepEqual(got, c.details) {
					t.Errorf("details = %#v, want %#v", got, c.details)
				}
			}
		})
	}
}

func TestApplyIsAllOrNothing(t *testing.T) {
	r := mustApply(t, Empty(), bundle("base", typ("T", 2, `"1":{"name":"a","type":"string"}`), ""))
	// A new enum and a new type come before the faulty type in apply order.
	bad := bundle("bad", typ("A", 1, `"1":{"name":"a","type":"u8"}`)+","+typ("T", 1, ""), `"New":{"1":"x"}`)
	next, _, err := r.Apply(bad)
	checkErr(t, err, ErrConflict, "type T version 1 is below its latest version 2")
	if _, ok := next.Enum("New"); ok {
		t.Error("enum of a refused bundle is visible")
	}
	if _, ok := next.Latest("A"); ok {
		t.Error("type of a refused bundle is visible")
	}
	if _, _, ok := next.Bundle("bad"); ok || next.Generation() != 1 || next.LastBundleID() != "base" {
		t.Error("refused bundle recorded")
	}
}

func TestGenerationAndLastBundleID(t *testing.T) {
	r := Empty()
	if r.Generation() != 0 || r.LastBundleID() != "" || r.BundleCount() != 0 || r.TypeCount() != 0 {
		t.Fatal("Empty is not empty")
	}
	a, b := bundle("a", typ("T", 1, ""), ""), bundle("b", typ("U", 1, ""), "")
	steps := []struct {
		body    []byte
		created bool
		gen     uint64
		last    string
	}{
		{a, true, 1, "a"},
		{a, false, 1, "a"},
		{b, true, 2, "b"},
		{a, false, 2, "b"},
		{b, false, 2, "b"},
	}
	for i, s := range steps {
		next, created, err := r.Apply(s.body)
		if err != nil || created != s.created || next.Generation() != s.gen || next.LastBundleID() != s.last {
			t.Fatalf("step %d: created=%v gen=%d last=%q err=%v", i, created, next.Generation(), next.LastBundleID(), err)
		}
		r = next
	}
	if r.BundleCount() != 2 || r.TypeCount() != 2 {
		t.Errorf("counts = %d bundles, %d types", r.BundleCount(), r.TypeCount())
	}
	if Empty().Generation() != 0 || Empty().BundleCount() != 0 {
		t.Error("Apply changed Empty()")
	}
}

func TestRendererAdoption(t *testing.T) {
	const f = `"1":{"name":"a","type":"string"}`
	withR := func(id, url string) []byte {
		return bundle(id, fmt.Sprintf(`"T":{"versions":{"1":{"fields":{%s},"renderer":{"esm_url":%q}}}}`, f, url), "")
	}
	r := mustApply(t, Empty(), bundle("a", typ("T", 1, f), ""))
	r = mustApply(t, r, withR("b", "builtin:First"))
	if d, _ := r.Descriptor("T", 1); d.Renderer == nil || d.Renderer.ESMURL != "builtin:First" {
		t.Fatalf("renderer not adopted: %+v", d.Renderer)
	}
	// A stored renderer is kept: the reference changes nothing else.
	r = mustApply(t, r, withR("c", "builtin:Second"))
	if d, _ := r.Descriptor("T", 1); d.Renderer.ESMURL != "builtin:First" {
		t.Fatalf("renderer replaced: %+v", d.Renderer)
	}
	// Nor does a bundle without one drop it.
	r = mustApply(t, r, bundle("d", typ("T", 1, f), ""))
	if d, _ := r.Descriptor("T", 1); d.Renderer == nil {
		t.Fatal("renderer dropped")
	}
}

func TestLookups(t *testing.T) {
	raw := bundle("b#1", `"T":{"versions":{
		"2":{"fields":{"1":{"name":"a","type":"string"}},"renderer":{"esm_url":"builtin:Two"}},
		"10":{"fields":{"1":{"name":"b","type":"string"}}}}},
		"R":{"versions":{"1":{"renderer":{"esm_url":"https://x/r.js","component":"C","integrity":"sha384-y"}}}},
		"A":{"versions":{"5":{}}}`, `"E":{"1":"one"}`)
	r := mustApply(t, Empty(), raw)
	if d, ok := r.Latest("T"); !ok || d.Version != 10 || d.Fields[1].Name != "b" {
		t.Errorf("Latest = %+v %v (must be numeric, not lexical)", d, ok)
	}
	if d, ok := r.Descriptor("T", 2); !ok || d.TypeID != "T" || d.Fields[1].Name != "a" {
		t.Errorf("Descriptor(T,2) = %+v %v", d, ok)
	}
	if _, ok := r.Descriptor("T", 3); ok {
		t.Error("Descriptor(T,3) found")
	}
	if _, ok := r.Latest("nope"); ok {
		t.Error("Latest(nope) found")
	}
	if l, ok := r.Enum("E"); !ok || l["1"] != "one" {
		t.Errorf("Enum = %v %v", l, ok)
	}
	if _, ok := r.Enum("F"); ok {
		t.Error("Enum(F) found")
	}
	got, etag, ok := r.Bundle("b#1")
	sum := blake3.Sum256(raw)
	if !ok || string(got) != string(raw) || etag != `"`+hex.EncodeToString(sum[:])+`"` || len(etag) != 66 {
		t.Errorf("Bundle = %q %q %v", got, etag, ok)
	}
	got[0] = 'X'
	if again, _, _ := r.Bundle("b#1"); again[0] != '{' {
		t.Error("Bundle returned the stored slice")
	}
	if _, _, ok := r.Bundle("b"); ok {
		t.Error("Bundle matched a prefix")
	}
	wantTypes := []TypeSummary{
		{TypeID: "A", Versions: []uint32{5}, LatestVersion: 5},
		{TypeID: "R", Versions: []uint32{1}, LatestVersion: 1},
		{TypeID: "T", Versions: []uint32{2, 10}, LatestVersion: 10},
	}
	if ts := r.Types(); !reflect.DeepEqual(ts, wantTypes) {
		t.Errorf("Types = %+v", ts)
	}
	// T's highest version has no renderer, so T is absent.
	wantR := map[string]Renderer{"R": {ESMURL: "https://x/r.js", Component: "C", Integrity: "sha384-y"}}
	if rs := r.Renderers(); !reflect.DeepEqual(rs, wantR) {
		t.Errorf("Renderers = %+v", rs)
	}
}

func TestDescriptorJSON(t *testing.T) {
	cases := []struct {
		name string
		d    Descriptor
		want string
	}{
		{"empty", Descriptor{}, `{"fields":{}}`},
		{"every key", Descriptor{Fields: map[uint64]Field{
			1:  {Name: "s", Type: "string"},
			2:  {Name: "e", Type: "u8", Enum: "E", Optional: true},
			3:  {Name: "r", Type: "ref", Ref: "U"},
			4:  {Name: "a", Type: "array", Items: &Items{Type: "string"}},
			10: {Name: "t", Type: "array", Items: &Items{Type: "ref", Ref: "U"}},
		}, Renderer: &Renderer{ESMURL: "https://x/r.js?a=1&b=<2>"}},
			`{"fields":{"1":{"name":"s","type":"string"},"10":{"name":"t","type":"array","items":{"type":"ref","ref":"U"}},` +
				`"2":{"name":"e","type":"u8","enum":"E","optional":true},"3":{"name":"r","type":"ref","ref":"U"},` +
				`"4":{"name":"a","type":"array","items":"string"}},"renderer":{"esm_url":"https://x/r.js?a=1&b=<2>"}}`},
		{"full renderer", Descriptor{Renderer: &Renderer{ESMURL: "builtin:X", Component: "C", Integrity: "sha384-z"}},
			`{"fields":{},"renderer":{"esm_url":"builtin:X","component":"C","integrity":"sha384-z"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DescriptorJSON(c.d)
			if err != nil || string(got) != c.want {
				t.Errorf("DescriptorJSON =\n%s\nwant\n%s (%v)", got, c.want, err)
			}
		})
	}
}

func TestRenderersJSON(t *testing.T) {
	cases := []struct {
		name   string
		bodies [][]byte
		want   string
	}{
		{"none", nil, `{"renderers":{}}`},
		{"latest only", [][]byte{
			bundle("a", `"T":{"versions":{"1":{"renderer":{"esm_url":"builtin:Old"}}}},`+
				`"U":{"versions":{"1":{"renderer":{"esm_url":"builtin:U","component":"C"}}}}`, ""),
			bundle("b", `"T":{"versions":{"2":{"renderer":{"esm_url":"builtin:New","integrity":"sha384-i"}}}}`, ""),
		}, `{"renderers":{"T":{"esm_url":"builtin:New","integrity":"sha384-i"},"U":{"esm_url":"builtin:U","component":"C"}}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := mustApply(t, Empty(), c.bodies...).RenderersJSON()
			if err != nil || string(got) != c.want {
				t.Errorf("RenderersJSON = %s, want %s (%v)", got, c.want, err)
			}
		})
	}
}

func TestConversationBundle(t *testing.T) {
	r, created, err := Empty().Apply(ConversationBundle)
	if err != nil || !created {
		t.Fatalf("Apply = %v %v", created, err)
	}
	if r.LastBundleID() != ConversationBundleID || r.TypeCount() != 14 {
		t.Errorf("last = %q, types = %d", r.LastBundleID(), r.TypeCount())
	}
	item, ok := r.Latest("cxdb.ConversationItem")
	if !ok || item.Version != 3 || item.Fields[11].Ref != "cxdb.AssistantTurn" || item.Fields[30].Ref != "cxdb.ContextMetadata" {
		t.Fatalf("ConversationItem = %+v", item)
	}
	// Every ref, field or item, names a type of the bundle.
	for _, ts := range r.Types() {
		d, _ := r.Latest(ts.TypeID)
		for tag, f := range d.Fields {
			for _, ref := range []string{f.Ref, itemRef(f.Items)} {
				if _, ok := r.Latest(ref); ref != "" && !ok {
					t.Errorf("%s tag %d: unknown ref %s", ts.TypeID, tag, ref)
				}
			}
		}
	}
	turn, _ := r.Latest("cxdb.AssistantTurn")
	js, _ := DescriptorJSON(Descriptor{Fields: map[uint64]Field{2: turn.Fields[2]}})
	if want := `{"fields":{"2":{"name":"tool_calls","type":"array","items":{"type":"ref","ref":"cxdb.ToolCallItem"},"optional":true}}}`; string(js) != want {
		t.Errorf("tool_calls = %s", js)
	}
	if rs := r.Renderers(); rs["cxdb.ConversationItem"].ESMURL != "builtin:ConversationRenderer" {
		t.Errorf("renderers = %v", rs)
	}
	if _, created, err := r.Apply(ConversationBundle); created || err != nil {
		t.Errorf("republish = %v %v", created, err)
	}
}

func itemRef(it *Items) string {
	if it == nil {
		return ""
	}
	return it.Ref
}

func fixtureBundles(t *testing.T) []string {
	t.Helper()
	paths := testkit.CXDBFixtureFiles(t, "registry")
	if len(paths) != 2 {
		t.Fatalf("fixtures = %v, want 2", paths)
	}
	return paths
}

func TestFixtureBundlesRefused(t *testing.T) {
	for _, p := range fixtureBundles(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = Empty().Apply(raw)
			checkErr(t, err, ErrMalformed, "invalid json: missing registry_version")
		})
	}
}

func TestFixtureShapeRefusedWithHeader(t *testing.T) {
	// Even with the header keys, types as an array is refused.
	body := `{"registry_version":1,"bundle_id":"x","types":[{"type_id":"T","type_version":1,"fields":[]}],"renderers":[]}`
	_, err := Parse([]byte(body))
	checkErr(t, err, ErrMalformed, "invalid json: types: expected an object, got an array")
}

// replayBodies is a history of n bundles, each adding a version to one of
// a few types, some also republishing earlier versions.
func replayBodies(n int) [][]byte {
	var bodies [][]byte
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("T%d", i%7)
		v := uint32(i/7 + 1)
		fields := fmt.Sprintf(`"1":{"name":"a","type":"string"},"%d":{"name":"f%d","type":"u64"}`, i+2, i)
		types := typ(id, v, fields) + "," + typ(fmt.Sprintf("Only%d", i), 1, "")
		bodies = append(bodies, bundle(fmt.Sprintf("bundle-%d", i), types, fmt.Sprintf(`"E%d":{"1":"x"}`, i)))
	}
	return bodies
}

func TestReplay(t *testing.T) {
	bodies := replayBodies(400)
	live := Empty()
	for _, b := range bodies {
		live = mustApply(t, live, b)
		// Clients retry; a republish in the middle must not disturb replay.
		live = mustApply(t, live, bodies[0])
	}
	replayed := mustApply(t, Empty(), bodies...)
	if dump(t, replayed) != dump(t, live) {
		t.Error("replay differs from the live registry")
	}
	if replayed.Generation() != 400 || replayed.LastBundleID() != "bundle-399" || replayed.TypeCount() != 407 {
		t.Errorf("gen=%d last=%q types=%d", replayed.Generation(), replayed.LastBundleID(), replayed.TypeCount())
	}
}

func BenchmarkReplay(b *testing.B) {
	bodies := replayBodies(500)
	for b.Loop() {
		mustApply(b, Empty(), bodies...)
	}
}

func TestConcurrentReaders(t *testing.T) {
	bodies := replayBodies(50)
	r := mustApply(t, Empty(), bodies[0])
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if d, ok := r.Latest("T0"); !ok || d.Version != 1 || r.Generation() != 1 {
					t.Error("snapshot changed under a reader")
					return
				}
				_, _ = r.RenderersJSON()
				_ = r.Types()
			}
		})
	}
	for _, b := range bodies[1:] {
		if _, _, err := r.Apply(b); err != nil {
			t.Error(err)
		}
	}
	wg.Wait()
}
