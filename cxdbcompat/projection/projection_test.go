package projection

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cardboxhq/cardbox/cxdbcompat/registry"
)

// registry is a registry of the canonical conversation types (spec
// section 9), as a server would seed it.
type fakeRegistry struct {
	types map[string]Descriptor
	enums map[string]map[string]string
}

func (r fakeRegistry) Latest(id string) (Descriptor, bool)      { d, ok := r.types[id]; return d, ok }
func (r fakeRegistry) Enum(id string) (map[string]string, bool) { e, ok := r.enums[id]; return e, ok }

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

// canonical JSON for comparing projections.
func canonical(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestConversationItemFixture(t *testing.T) {
	r, err := Project(fixture(t, "msgpack_conversation_item"), conversation.types["cxdb.ConversationItem"], conversation, Options{IncludeUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"context_metadata":{"client_tag":"fixture-tag","custom":{"env":"test"},"labels":["alpha","beta"],"title":"Fixture Title"},` +
		`"id":"item-1","item_type":"user_input","status":"complete","timestamp":"2023-11-14T22:13:20+00:00",` +
		`"user_input":{"files":["file.txt"],"text":"Hello from fixtures"}}`
	if got := canonical(t, r.Data); got != want {
		t.Fatalf("data =\n%s\nwant\n%s", got, want)
	}
	// Tags 11, 12, 13, 20, 21, 22 are nil; the descriptor above does not
	// name them.
	if got := canonical(t, r.Unknown); got != `{"11":null,"12":null,"13":null,"20":null,"21":null,"22":null}` {
		t.Fatalf("unknown = %s", got)
	}
}

func TestNumericMapFixture(t *testing.T) {
	d := Descriptor{Fields: map[uint64]Field{1: {Name: "one", Type: "string"}, 2: {Name: "two", Type: "string"}, 3: {Name: "three", Type: "string"}}}
	r, err := Project(fixture(t, "msgpack_numeric_map"), d, nil, Options{})
	if err != nil || canonical(t, r.Data) != `{"one":"one","three":"three","two":"two"}` {
		t.Fatalf("data = %v, %v", r.Data, err)
	}
}

func TestRenderRules(t *testing.T) {
	reg := fakeRegistry{enums: map[string]map[string]string{"color": {"1": "red"}}}
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.field.Name = "f"
			payload := enc(map[uint64]any{1: tt.value})
			r, err := Project(payload, Descriptor{Fields: map[uint64]Field{1: tt.field}}, reg, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if got := canonical(t, r.Data["f"]); got != tt.want {
				t.Fatalf("rendered %s, want %s", got, tt.want)
			}
		})
	}
}

func TestRefusesWhatIsNotAMap(t *testing.T) {
	for _, b := range [][]byte{{0x91, 0x01}, {0xc1}, {}, {0xdd, 0xff, 0xff, 0xff, 0xff}} {
		if _, err := Project(b, Descriptor{}, nil, Options{}); !errors.Is(err, ErrNotMap) && !errors.Is(err, ErrDecode) {
			t.Errorf("%x: %v, want a decode error or not a map", b, err)
		}
	}
}

func FuzzProject(f *testing.F) {
	f.Add(fixtureBytes("msgpack_conversation_item"))
	f.Add([]byte{0x81, 0x01, 0xdd, 0xff, 0xff, 0xff, 0x7f})
	d := conversation.types["cxdb.ConversationItem"]
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Project(b, d, conversation, Options{IncludeUnknown: true})
		if err == nil {
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("projection does not marshal: %v", err)
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
	b.ReportAllocs()
	for b.Loop() {
		r, err := Project(payload, d, conversation, Options{})
		if err != nil {
			b.Fatal(err)
		}
		sink = r
	}
}
