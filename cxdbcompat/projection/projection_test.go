package projection

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// fakeRegistry is a registry of fixed types and enums.
type fakeRegistry struct {
	types map[string]Descriptor
	enums map[string]map[string]string
}

func (r fakeRegistry) Latest(id string) (Descriptor, bool)      { d, ok := r.types[id]; return d, ok }
func (r fakeRegistry) Enum(id string) (map[string]string, bool) { e, ok := r.enums[id]; return e, ok }

// conversation is a registry of part of the canonical conversation types
// (spec section 9).
var conversation = fakeRegistry{
	types: map[string]Descriptor{
		"cxdb.ConversationItem": {TypeID: "cxdb.ConversationItem", Version: 3, Fields: map[uint64]Field{
			1: {Name: "item_type", Type: "string"}, 2: {Name: "status", Type: "string"},
			3: {Name: "timestamp", Type: "unix_ms"}, 4: {Name: "id", Type: "string"},
			10: {Name: "user_input", Type: "ref", Ref: "cxdb.UserInput"},
			30: {Name: "context_metadata", Type: "ref", Ref: "cxdb.ContextMetadata"},
		}},
		"cxdb.UserInput": {TypeID: "cxdb.UserInput", Version: 1, Fields: map[uint64]Field{
			1: {Name: "text", Type: "string"}, 2: {Name: "files", Type: "array", Items: &registry.Items{Type: "string"}},
		}},
		"cxdb.ContextMetadata": {TypeID: "cxdb.ContextMetadata", Version: 1, Fields: map[uint64]Field{
			1: {Name: "client_tag", Type: "string"}, 2: {Name: "title", Type: "string"},
			3: {Name: "labels", Type: "array", Items: &registry.Items{Type: "string"}}, 4: {Name: "custom", Type: "map"},
		}},
	},
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		PayloadHex string `json:"payload_hex"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	b, err := hex.DecodeString(f.PayloadHex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConversationItemFixture(t *testing.T) {
	payload := fixture(t, "msgpack_conversation_item")
	d := conversation.types["cxdb.ConversationItem"]
	o := Options{IncludeUnknown: true}
	r, err := Project(payload, d, conversation, o)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"context_metadata":{"client_tag":"fixture-tag","custom":{"env":"test"},"labels":["alpha","beta"],"title":"Fixture Title"},` +
		`"id":"item-1","item_type":"user_input","status":"complete","timestamp":"2023-11-14T22:13:20+00:00",` +
		`"user_input":{"files":["file.txt"],"text":"Hello from fixtures"}}`
	if string(r.Data) != want {
		t.Fatalf("data =\n%s\nwant\n%s", r.Data, want)
	}
	// Tags 11, 12, 13, 20, 21, 22 are nil; the descriptor above does not
	// name them.
	if got := string(r.Unknown); got != `{"11":null,"12":null,"13":null,"20":null,"21":null,"22":null}` {
		t.Fatalf("unknown = %s", got)
	}
	sameAsOracle(t, payload, d, conversation, o)
}

func TestNumericMapFixture(t *testing.T) {
	d := Descriptor{Fields: map[uint64]Field{1: {Name: "one", Type: "string"}, 2: {Name: "two", Type: "string"}, 3: {Name: "three", Type: "string"}}}
	r, err := Project(fixture(t, "msgpack_numeric_map"), d, nil, Options{})
	if err != nil || string(r.Data) != `{"one":"one","three":"three","two":"two"}` {
		t.Fatalf("data = %s, %v", r.Data, err)
	}
	if r.Unknown != nil {
		t.Fatalf("unknown = %s, not asked for", r.Unknown)
	}
}

func enc(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRenderRules(t *testing.T) {
	reg := fakeRegistry{enums: map[string]map[string]string{"color": {"1": "red"}}}
	tests := []struct {
		name  string
		field Field
		value any
		o     Options
		want  string
	}{
		{"u64 as string", Field{Type: "u64"}, uint64(7), Options{}, `"7"`},
		{"u64 as number", Field{Type: "uint64"}, uint64(7), Options{U64: "number"}, `7`},
		{"negative int64 is null", Field{Type: "int64"}, int64(-3), Options{}, `null`},
		{"u32 is a number", Field{Type: "u32"}, uint32(9), Options{}, `9`},
		{"u16 renders generically: a string", Field{Type: "u16"}, uint16(9), Options{}, `"9"`},
		{"string of a number is null", Field{Type: "string"}, 5, Options{}, `null`},
		{"bytes base64", Field{Type: "bytes"}, []byte{1, 2}, Options{}, `"AQI="`},
		{"bytes hex", Field{Type: "typed_blob"}, []byte{1, 2}, Options{Bytes: "hex"}, `"0102"`},
		{"bytes length", Field{Type: "bytes"}, []byte{1, 2}, Options{Bytes: "len_only"}, `2`},
		{"typed_blob as a map is null", Field{Type: "typed_blob"}, map[string]int{"a": 1}, Options{}, `null`},
		{"array of strings, one not", Field{Type: "array", Items: &registry.Items{Type: "string"}}, []any{"a", 1}, Options{}, `["a",null]`},
		{"time with milliseconds", Field{Type: "timestamp_ms"}, int64(1700000000123), Options{}, `"2023-11-14T22:13:20.123+00:00"`},
		{"time as number", Field{Type: "unix_ms"}, int64(1700000000123), Options{Time: "unix_ms"}, `1700000000123`},
		{"enum label", Field{Type: "u32", Enum: "color"}, 1, Options{}, `"red"`},
		{"enum both", Field{Type: "u32", Enum: "color"}, 1, Options{Enum: "both"}, `{"label":"red","value":1}`},
		{"enum unknown value falls through", Field{Type: "u32", Enum: "color"}, 2, Options{}, `2`},
		{"generic map with integer keys", Field{Type: "map"}, map[int]any{1: "x", 2: -1}, Options{}, `{"1":"x","2":-1}`},
		{"ref to an unknown type is generic", Field{Type: "ref", Ref: "nope"}, map[string]any{"1": uint8(3)}, Options{}, `{"1":"3"}`},
		// Beyond the cases the map-based renderer had.
		{"enum number", Field{Type: "u32", Enum: "color"}, 1, Options{Enum: "number"}, `1`},
		{"invalid UTF-8 string is empty", Field{Type: "string"}, "a\xffb", Options{}, `""`},
		{"control characters escaped", Field{Type: "string"}, "a\"\\\n\t\x01\u2028<>&", Options{}, `"a\"\\\n\t\u0001\u2028<>&"`},
		{"time out of range is null", Field{Type: "unix_ms"}, int64(1) << 62, Options{}, `null`},
		{"time before 1970", Field{Type: "time_ms"}, int64(-1), Options{}, `"1969-12-31T23:59:59.999+00:00"`},
		{"floats as encoding/json", Field{Type: "f64"}, []any{1.5, 1e21, 1e-7, float32(0.1)}, Options{}, `[1.5,1e+21,1e-7,0.10000000149011612]`},
		{"generic map keys sorted, odd keys empty", Field{Type: "map"}, map[any]any{"b": 1, "a": nil, true: "t"}, Options{}, `{"":"t","a":null,"b":"1"}`},
		{"bool", Field{Type: "bool"}, true, Options{}, `true`},
		{"bool of a string is null", Field{Type: "bool"}, "true", Options{}, `null`},
		{"array of arrays renders inner items generically", Field{Type: "array", Items: &registry.Items{Type: "array"}}, []any{[]any{uint8(1)}}, Options{}, `[["1"]]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.field.Name = "f"
			payload := enc(t, map[uint64]any{1: tt.value})
			d := Descriptor{Fields: map[uint64]Field{1: tt.field}}
			r, err := Project(payload, d, reg, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(r.Data), `{"f":`+tt.want+`}`; got != want {
				t.Fatalf("rendered %s, want %s", got, want)
			}
			sameAsOracle(t, payload, d, reg, tt.o)
		})
	}
}

func TestLaterDuplicateWins(t *testing.T) {
	// 1 and "1" are the same tag; "01" is too.
	payload := []byte{0x84, 0x01, 0xa1, 'a', 0xa1, '1', 0xa1, 'b', 0x02, 0x81, 0xa1, 'x', 0x01, 0xa2, '0', '2', 0x81, 0xa1, 'x', 0x02}
	d := Descriptor{Fields: map[uint64]Field{1: {Name: "one", Type: "string"}}}
	o := Options{IncludeUnknown: true}
	r, err := Project(payload, d, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Data) != `{"one":"b"}` || string(r.Unknown) != `{"2":{"x":"2"}}` {
		t.Fatalf("data %s, unknown %s", r.Data, r.Unknown)
	}
	sameAsOracle(t, payload, d, nil, o)
}

func TestSharedNameLaterWins(t *testing.T) {
	// The map-based renderer chose by map iteration order here.
	d := Descriptor{Fields: map[uint64]Field{1: {Name: "n", Type: "string"}, 2: {Name: "n", Type: "u32"}}}
	for payload, want := range map[string]string{
		"\x82\x01\xa1a\x02\x05": `{"n":5}`,
		"\x82\x02\x05\x01\xa1a": `{"n":"a"}`,
	} {
		r, err := Project([]byte(payload), d, nil, Options{})
		if err != nil || string(r.Data) != want {
			t.Errorf("%x: %s, %v; want %s", payload, r.Data, err, want)
		}
	}
}

func TestNoUnknownIsEmptyObject(t *testing.T) {
	r, err := Project([]byte{0x80}, Descriptor{}, nil, Options{IncludeUnknown: true})
	if err != nil || string(r.Data) != `{}` || string(r.Unknown) != `{}` {
		t.Fatalf("data %s, unknown %s, %v", r.Data, r.Unknown, err)
	}
}

func TestRefusesWhatIsNotAMap(t *testing.T) {
	for _, b := range [][]byte{{0x91, 0x01}, {0xc1}, {}, {0xdd, 0xff, 0xff, 0xff, 0xff}} {
		if _, err := Project(b, Descriptor{}, nil, Options{}); !errors.Is(err, ErrNotMap) && !errors.Is(err, ErrDecode) {
			t.Errorf("%x: %v, want a decode error or not a map", b, err)
		}
	}
	if _, err := Project([]byte{0x91, 0x01}, Descriptor{}, nil, Options{}); !errors.Is(err, ErrNotMap) {
		t.Errorf("an array: %v, want not a map", err)
	}
	if _, err := Project([]byte{0x92, 0x01}, Descriptor{}, nil, Options{}); !errors.Is(err, ErrDecode) {
		t.Errorf("a short array: %v, want a decode error", err)
	}
}

func TestDepthLimit(t *testing.T) {
	nest := func(n int) []byte { // n maps, each the value of key 1 of the one before
		b := bytes.Repeat([]byte{0x81, 0x01}, n)
		return append(b, 0xc0)
	}
	d := Descriptor{Fields: map[uint64]Field{1: {Name: "v", Type: "map"}}}
	for _, n := range []int{maxDepth, maxDepth + 1, maxDepth + 2} {
		_, err := Project(nest(n), d, nil, Options{})
		_, oerr := oracleProject(nest(n), d, nil, Options{})
		if (err == nil) != (oerr == nil) || n <= maxDepth && err != nil || n > maxDepth && !errors.Is(err, ErrDecode) {
			t.Errorf("%d levels: %v, map-based %v", n, err, oerr)
		}
	}
}

// sameAsOracle fails unless Project gives what the map-based renderer
// gives, as parsed JSON, and fails the same way.
func sameAsOracle(t testing.TB, payload []byte, d Descriptor, reg Registry, o Options) {
	t.Helper()
	r, err := Project(payload, d, reg, o)
	want, werr := oracleProject(payload, d, reg, o)
	if errors.Is(err, ErrNotMap) != errors.Is(werr, ErrNotMap) || errors.Is(err, ErrDecode) != errors.Is(werr, ErrDecode) || (err == nil) != (werr == nil) {
		t.Fatalf("payload %x: error %v, map-based %v", payload, err, werr)
	}
	if err != nil {
		return
	}
	if !json.Valid(r.Data) || o.IncludeUnknown && !json.Valid(r.Unknown) {
		t.Fatalf("payload %x: not JSON: %s %s", payload, r.Data, r.Unknown)
	}
	sameLen(t, payload, d, reg, o, len(r.Data)+len(r.Unknown))
	if got, wantJSON := parse(t, r.Data), parse(t, marshal(t, want.Data)); !reflect.DeepEqual(got, wantJSON) {
		t.Fatalf("payload %x: data\n%s\nmap-based\n%s", payload, r.Data, marshal(t, want.Data))
	}
	if !o.IncludeUnknown {
		if r.Unknown != nil {
			t.Fatalf("unknown %s, not asked for", r.Unknown)
		}
		return
	}
	if got, wantJSON := parse(t, r.Unknown), parse(t, marshal(t, want.Unknown)); !reflect.DeepEqual(got, wantJSON) {
		t.Fatalf("payload %x: unknown\n%s\nmap-based\n%s", payload, r.Unknown, marshal(t, want.Unknown))
	}
}

func marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parse parses JSON keeping numbers as their text.
func parse(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// fuzzDescriptor names a field of every type string projection tells
// apart, refs to itself and to the conversation types included.
var fuzzDescriptor = Descriptor{TypeID: "fuzz.All", Version: 1, Fields: map[uint64]Field{
	0: {Name: "u64", Type: "u64"}, 1: {Name: "u32", Type: "u32"}, 2: {Name: "string", Type: "string"},
	3: {Name: "bool", Type: "bool"}, 4: {Name: "bytes", Type: "bytes"}, 5: {Name: "time", Type: "unix_ms"},
	6: {Name: "strings", Type: "array", Items: &registry.Items{Type: "string"}},
	7: {Name: "alls", Type: "array", Items: &registry.Items{Type: "ref", Ref: "fuzz.All"}},
	8: {Name: "enum", Type: "u64", Enum: "color"}, 9: {Name: "all", Type: "ref", Ref: "fuzz.All"},
	10: {Name: "map", Type: "map"}, 11: {Name: "any", Type: "array"}, 12: {Name: "nope", Type: "ref", Ref: "nope"},
	13: {Name: "arrays", Type: "array", Items: &registry.Items{Type: "array"}}, 14: {Name: "ref", Type: "ref"},
	15: {Name: "turn", Type: "ref", Ref: "cxdb.AssistantTurn"}, 16: {Name: "flag", Type: "bool"},
	17: {Name: "ñ\"\x01", Type: "i64"}, 18: {Name: "blob", Type: "typed_blob"},
}}

var fuzzOptions = []Options{
	{IncludeUnknown: true},
	{Bytes: "hex", U64: "number", Enum: "both", Time: "unix_ms", IncludeUnknown: true},
	{Bytes: "len_only", Enum: "number"},
}

func FuzzProject(f *testing.F) {
	f.Add(fixtureBytes("msgpack_conversation_item"))
	f.Add(fixtureBytes("msgpack_numeric_map"))
	f.Add(conversationTurn(f))
	f.Add([]byte{0x81, 0x01, 0xdd, 0xff, 0xff, 0xff, 0x7f})
	f.Add(enc(f, map[string]any{"0": uint64(1), "1": -2, "2": "s\xff", "3": true, "4": []byte{1}, "5": int64(1700000000123),
		"6": []any{"a", 1.5}, "7": []any{map[string]any{"9": map[int]any{8: 1}}}, "8": 2, "10": map[any]any{1.5: nil, "k": float32(2)},
		"11": []any{nil}, "12": map[string]any{"x": "y"}, "13": []any{[]any{1}}, "14": 3, "15": map[string]any{"2": []any{map[string]any{"1": "id"}}},
		"16": false, "17": -9, "18": []byte("blob"), "99": "unknown"}))
	descriptors := []Descriptor{conversation.types["cxdb.ConversationItem"], fullConversation.types["cxdb.ConversationItem"], fuzzDescriptor}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, d := range descriptors {
			for _, o := range fuzzOptions {
				sameAsOracle(t, b, d, fullConversation, o)
			}
		}
	})
}

func fixtureBytes(name string) []byte {
	raw, _ := os.ReadFile("testdata/" + name + ".json")
	var fx struct {
		PayloadHex string `json:"payload_hex"`
	}
	_ = json.Unmarshal(raw, &fx)
	b, _ := hex.DecodeString(fx.PayloadHex)
	return b
}

var sink Result

func BenchmarkProjectConversationItem(b *testing.B) {
	payload := fixture(b, "msgpack_conversation_item")
	d := conversation.types["cxdb.ConversationItem"]
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := Project(payload, d, conversation, Options{})
		if err != nil {
			b.Fatal(err)
		}
		sink = r
	}
}

func BenchmarkProjectConversationTurn1KiB(b *testing.B) {
	payload := conversationTurn(b)
	d := fullConversation.types["cxdb.ConversationItem"]
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := Project(payload, d, fullConversation, Options{})
		if err != nil {
			b.Fatal(err)
		}
		sink = r
	}
}

// tagged is a struct as the Go client writes it: a map of digit-string
// tags, in declaration order.
type tagged []any // tag, value, tag, value, ...

// EncodeMsgpack implements msgpack.CustomEncoder.
func (t tagged) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeMapLen(len(t) / 2); err != nil {
		return err
	}
	for i := 0; i < len(t); i += 2 {
		if err := e.EncodeString(strconv.Itoa(t[i].(int))); err != nil {
			return err
		}
		if err := e.Encode(t[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func TestAppendNameIsEncodingJSON(t *testing.T) {
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	inputs := []string{"", "plain ascii text", "\u2028\u2029\u2027 ñ€😀", string(all), "0123456\"89abcdef\\", "\xe2\x80", "a\xe2\x80\xa8"}
	for i := range 40 {
		inputs = append(inputs, strings.Repeat("x", i)+"\x1f"+strings.Repeat("y", 40-i)+"é")
	}
	for _, s := range inputs {
		var want bytes.Buffer
		e := json.NewEncoder(&want)
		e.SetEscapeHTML(false)
		if err := e.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := appendKey(nil, []byte(s)); string(got) != strings.TrimSuffix(want.String(), "\n") {
			t.Errorf("%q: %s, want %s", s, got, want.String())
		}
		if got := appendName(nil, s); string(got) != strings.TrimSuffix(want.String(), "\n") {
			t.Errorf("label %q: %s, want %s", s, got, want.String())
		}
	}
}
