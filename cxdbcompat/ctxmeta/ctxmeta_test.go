package ctxmeta

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cardboxhq/cardbox/internal/testkit"
)

func sp(s string) *string     { return &s }
func u64p(v uint64) *uint64   { return &v }
func idp(v uint64) *ContextID { id := ContextID(v); return &id }
func i64p(v int64) *int64     { return &v }

// pack encodes v with msgpack, failing the test on error.
func pack(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mp builds a map from alternating keys and values.
func mp(kv ...any) map[any]any {
	m := make(map[any]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// keyFn turns a tag into a map key of one encoding.
type keyFn func(int) any

var keyKinds = map[string]keyFn{
	"int":    func(n int) any { return n },                      // compact int
	"int64":  func(n int) any { return int64(n) },               // d3
	"uint64": func(n int) any { return uint64(n) },              // cf
	"digits": func(n int) any { return strconv.Itoa(n) },        // "30"
	"zeros":  func(n int) any { return "00" + strconv.Itoa(n) }, // "0030"
}

// om encodes a map from alternating keys and values, keeping their order.
func om(t testing.TB, kv ...any) msgpack.RawMessage {
	t.Helper()
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	if err := enc.EncodeMapLen(len(kv) / 2); err != nil {
		t.Fatal(err)
	}
	for _, v := range kv {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func TestFixtureConversationItem(t *testing.T) {
	m, ok := Extract(testkit.TypePayload(t, "msgpack_conversation_item"))
	want := Metadata{ClientTag: sp("fixture-tag"), Title: sp("Fixture Title"), Labels: []string{"alpha", "beta"}}
	if !ok || !reflect.DeepEqual(m, want) {
		t.Fatalf("Extract = %+v, %v; want %+v", m, ok, want)
	}
}

func TestFixtureNumericMapHasNoMetadata(t *testing.T) {
	if m, ok := Extract(testkit.TypePayload(t, "msgpack_numeric_map")); ok {
		t.Fatalf("Extract = %+v, true; want false", m)
	}
}

func TestKeyKindsAtEveryLevel(t *testing.T) {
	for top, k1 := range keyKinds {
		for meta, k2 := range keyKinds {
			for prov, k3 := range keyKinds {
				t.Run(top+"/"+meta+"/"+prov, func(t *testing.T) {
					payload := pack(t, mp(k1(1), "user_input", k1(30), mp(
						k2(1), "tag", k2(2), "title", k2(3), []string{"x"},
						k2(10), mp(k3(1), 7, k3(60), map[string]string{"k": "v"}),
					)))
					m, ok := Extract(payload)
					want := Metadata{ClientTag: sp("tag"), Title: sp("title"), Labels: []string{"x"},
						Provenance: &Provenance{ParentContextID: idp(7), Env: map[string]string{"k": "v"}}}
					if !ok || !reflect.DeepEqual(m, want) {
						t.Fatalf("Extract = %+v, %v; want %+v", m, ok, want)
					}
				})
			}
		}
	}
}

// Go client types (clients/go/types): digit-string keys, no omitempty.
type goProvenance struct {
	ParentContextID   *uint64           `msgpack:"1"`
	SpawnReason       string            `msgpack:"2"`
	RootContextID     *uint64           `msgpack:"3"`
	TraceID           string            `msgpack:"10"`
	SpanID            string            `msgpack:"11"`
	CorrelationID     string            `msgpack:"12"`
	OnBehalfOf        string            `msgpack:"20"`
	OnBehalfOfSource  string            `msgpack:"21"`
	OnBehalfOfEmail   string            `msgpack:"22"`
	WriterMethod      string            `msgpack:"30"`
	WriterSubject     string            `msgpack:"31"`
	WriterIssuer      string            `msgpack:"32"`
	ServiceName       string            `msgpack:"40"`
	ServiceVersion    string            `msgpack:"41"`
	ServiceInstanceID string            `msgpack:"42"`
	ProcessPID        int               `msgpack:"43"`
	ProcessOwner      string            `msgpack:"44"`
	HostName          string            `msgpack:"45"`
	HostArch          string            `msgpack:"46"`
	ClientAddress     string            `msgpack:"50"`
	ClientPort        int               `msgpack:"51"`
	Env               map[string]string `msgpack:"60"`
	SDKName           string            `msgpack:"70"`
	SDKVersion        string            `msgpack:"71"`
	CapturedAt        int64             `msgpack:"80"`
}

type goContextMetadata struct {
	ClientTag  string            `msgpack:"1"`
	Title      string            `msgpack:"2"`
	Labels     []string          `msgpack:"3"`
	Custom     map[string]string `msgpack:"4"`
	Provenance *goProvenance     `msgpack:"10"`
}

type goItem struct {
	ItemType        string             `msgpack:"1"`
	Status          string             `msgpack:"2"`
	Timestamp       int64              `msgpack:"3"`
	ID              string             `msgpack:"4"`
	UserInput       *struct{}          `msgpack:"10"`
	ContextMetadata *goContextMetadata `msgpack:"30"`
}

var fullGoProvenance = goProvenance{
	ParentContextID: u64p(math.MaxUint64), SpawnReason: "fork", RootContextID: u64p(3),
	TraceID: "t", SpanID: "s", CorrelationID: "c", OnBehalfOf: "u", OnBehalfOfSource: "oidc",
	OnBehalfOfEmail: "u@example.com", WriterMethod: "m", WriterSubject: "sub", WriterIssuer: "iss",
	ServiceName: "svc", ServiceVersion: "1.0", ServiceInstanceID: "uuid", ProcessPID: 4242,
	ProcessOwner: "root", HostName: "h", HostArch: "arm64", ClientAddress: "10.0.0.1",
	ClientPort: 9009, Env: map[string]string{"A": "1", "B": "2"}, SDKName: "cxdb-go",
	SDKVersion: "0.1", CapturedAt: 1700000000000,
}

var fullProvenance = Provenance{
	ParentContextID: idp(math.MaxUint64), SpawnReason: sp("fork"), RootContextID: idp(3),
	TraceID: sp("t"), SpanID: sp("s"), CorrelationID: sp("c"), OnBehalfOf: sp("u"), OnBehalfOfSource: sp("oidc"),
	OnBehalfOfEmail: sp("u@example.com"), WriterMethod: sp("m"), WriterSubject: sp("sub"), WriterIssuer: sp("iss"),
	ServiceName: sp("svc"), ServiceVersion: sp("1.0"), ServiceInstanceID: sp("uuid"), ProcessPID: i64p(4242),
	ProcessOwner: sp("root"), HostName: sp("h"), HostArch: sp("arm64"), ClientAddress: sp("10.0.0.1"),
	ClientPort: i64p(9009), Env: map[string]string{"A": "1", "B": "2"}, SDKName: sp("cxdb-go"),
	SDKVersion: sp("0.1"), CapturedAt: i64p(1700000000000),
}

// intKeyed re-encodes a Go-client value with integer keys at every level
// (env and custom keep their string keys).
func intKeyed(t *testing.T, v any) []byte {
	t.Helper()
	var generic any
	if err := msgpack.Unmarshal(pack(t, v), &generic); err != nil {
		t.Fatal(err)
	}
	return pack(t, toIntKeys(generic, false))
}

func toIntKeys(v any, env bool) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[any]any, len(m))
	for k, val := range m {
		if env {
			out[k] = val
			continue
		}
		var n int
		if err := json.Unmarshal([]byte(k), &n); err != nil {
			panic(k)
		}
		out[n] = toIntKeys(val, n == 60 || n == 4) // env and custom keep string keys
	}
	return out
}

func TestProvenanceGoClient(t *testing.T) {
	empty := ""
	zero := int64(0)
	cases := []struct {
		name string
		prov *goProvenance
		want *Provenance
	}{
		{"full", &fullGoProvenance, &fullProvenance},
		{"unset", &goProvenance{}, &Provenance{
			SpawnReason: &empty, TraceID: &empty, SpanID: &empty, CorrelationID: &empty,
			OnBehalfOf: &empty, OnBehalfOfSource: &empty, OnBehalfOfEmail: &empty,
			WriterMethod: &empty, WriterSubject: &empty, WriterIssuer: &empty,
			ServiceName: &empty, ServiceVersion: &empty, ServiceInstanceID: &empty,
			ProcessPID: &zero, ProcessOwner: &empty, HostName: &empty, HostArch: &empty,
			ClientAddress: &empty, ClientPort: &zero, SDKName: &empty, SDKVersion: &empty,
			CapturedAt: &zero,
		}},
		{"nil", nil, nil},
	}
	for _, c := range cases {
		item := goItem{ItemType: "user_input", ContextMetadata: &goContextMetadata{
			ClientTag: "tag", Custom: map[string]string{"x": "y"}, Provenance: c.prov}}
		want := Metadata{ClientTag: sp("tag"), Title: sp(""), Provenance: c.want}
		for enc, payload := range map[string][]byte{"digits": pack(t, item), "ints": intKeyed(t, item)} {
			t.Run(c.name+"/"+enc, func(t *testing.T) {
				m, ok := Extract(payload)
				if !ok || !reflect.DeepEqual(m, want) {
					t.Fatalf("Extract = %+v, %v\nprovenance %s\nwant %s", m, ok, js(m.Provenance), js(want.Provenance))
				}
			})
		}
	}
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

// provOnly builds a payload whose provenance holds one tag/value pair.
func provOnly(t *testing.T, tag int, v any) []byte {
	t.Helper()
	return pack(t, mp(30, mp(10, mp(tag, v))))
}

func TestWrongTypedValues(t *testing.T) {
	neg := int64(-5)
	cases := []struct {
		name    string
		payload []byte
		want    Metadata
	}{
		{"u64 negative", provOnly(t, 1, -1), Metadata{Provenance: &Provenance{}}},
		{"u64 string", provOnly(t, 3, "5"), Metadata{Provenance: &Provenance{}}},
		{"u64 float", provOnly(t, 1, 1.5), Metadata{Provenance: &Provenance{}}},
		{"u64 as int64", provOnly(t, 1, int64(9)), Metadata{Provenance: &Provenance{ParentContextID: idp(9)}}},
		{"u64 as uint8", provOnly(t, 3, uint8(200)), Metadata{Provenance: &Provenance{RootContextID: idp(200)}}},
		{"string int", provOnly(t, 10, 5), Metadata{Provenance: &Provenance{}}},
		{"string bin", provOnly(t, 10, []byte("x")), Metadata{Provenance: &Provenance{}}},
		{"string nil", provOnly(t, 10, nil), Metadata{Provenance: &Provenance{}}},
		{"i64 negative", provOnly(t, 43, -5), Metadata{Provenance: &Provenance{ProcessPID: &neg}}},
		{"i64 too big", provOnly(t, 43, uint64(math.MaxUint64)), Metadata{Provenance: &Provenance{}}},
		{"i64 max", provOnly(t, 80, uint64(math.MaxInt64)), Metadata{Provenance: &Provenance{CapturedAt: i64p(math.MaxInt64)}}},
		{"i64 bool", provOnly(t, 51, true), Metadata{Provenance: &Provenance{}}},
		{"env mixed", provOnly(t, 60, mp("a", "b", "c", 1, 2, "d", "e", nil)),
			Metadata{Provenance: &Provenance{Env: map[string]string{"a": "b"}}}},
		{"env no string pair", provOnly(t, 60, mp("c", 1)), Metadata{Provenance: &Provenance{}}},
		{"env array", provOnly(t, 60, []string{"a", "b"}), Metadata{Provenance: &Provenance{}}},
		{"unknown provenance tag", provOnly(t, 99, "x"), Metadata{Provenance: &Provenance{}}},
		{"labels mixed", pack(t, mp(30, mp(3, []any{"a", 1, nil, "b", []string{"c"}}))), Metadata{Labels: []string{"a", "b"}}},
		{"client tag int", pack(t, mp(30, mp(1, 5, 2, "t"))), Metadata{Title: sp("t")}},
		{"provenance string", pack(t, mp(30, mp(10, "p", 1, "c"))), Metadata{ClientTag: sp("c")}},
		{"non-tag keys ignored", pack(t, mp(30, mp("x", "y", -1, "z", "1", "c", 1.5, "w"))), Metadata{ClientTag: sp("c")}},
		{"later duplicate wins", pack(t, mp(30, om(t, 1, "a", "01", "b", 2, "x", "2", 7))), Metadata{ClientTag: sp("b")}},
		{"later tag 30 wins", pack(t, om(t, 30, mp(1, "a"), "30", mp(2, "b"))), Metadata{Title: sp("b")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := Extract(c.payload)
			if !reflect.DeepEqual(m, c.want) {
				t.Fatalf("Extract = %s; want %s", js(m), js(c.want))
			}
		})
	}
}

func TestNoMetadata(t *testing.T) {
	deep := bytes.Repeat([]byte{0x91}, MaxDepth+1) // nested one-item arrays
	deep = append(deep, 0xc0)
	cases := []struct {
		name    string
		payload []byte
	}{
		{"empty", nil},
		{"array", pack(t, []int{1})},
		{"string", pack(t, "x")},
		{"no tag 30", pack(t, mp(1, "user_input", 31, mp(1, "x")))},
		{"tag 30 not a map", pack(t, mp(30, "x"))},
		{"tag 30 nil", pack(t, mp(30, nil))},
		{"tag 30 empty", pack(t, mp(30, mp()))},
		{"only custom", pack(t, mp(30, mp(4, mp("a", "b"))))},
		{"empty labels", pack(t, mp(30, mp(3, []any{1, nil})))},
		{"later tag 30 not a map", pack(t, om(t, 30, mp(1, "a"), "30", "x"))},
		{"truncated", pack(t, mp(30, mp(1, "abc")))[:7]},
		{"truncated after tag 30", pack(t, om(t, 30, mp(1, "a"), 1, "bcd"))[:9]},
		{"too deep in another field", append(append([]byte{0x82, 0x01}, deep...), append([]byte{30}, pack(t, mp(1, "a"))...)...)},
		{"huge map length", []byte{0xdf, 0xff, 0xff, 0xff, 0xff, 0x1e}},
		{"huge array length", append([]byte{0x82, 0x01, 0xdd, 0xff, 0xff, 0xff, 0xff}, 0x1e)},
		{"huge string length", []byte{0x81, 0x1e, 0x81, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}},
		{"huge bin length", []byte{0x82, 0x01, 0xc6, 0xff, 0xff, 0xff, 0xff}},
		{"huge ext length", []byte{0x82, 0x01, 0xc9, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"reserved code", []byte{0x82, 0x01, 0xc1, 0x1e, 0x81, 0x01, 0xa1, 'a'}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if m, ok := Extract(c.payload); ok {
				t.Fatalf("Extract = %s, true; want false", js(m))
			}
		})
	}
}

func TestTrailingBytesIgnored(t *testing.T) {
	payload := append(pack(t, mp(30, mp(1, "a"))), 0xc1, 0xdf, 0xff)
	if m, ok := Extract(payload); !ok || m.ClientTag == nil || *m.ClientTag != "a" {
		t.Fatalf("Extract = %s, %v", js(m), ok)
	}
}

func TestDepthLimit(t *testing.T) {
	nest := func(levels int) []byte { // levels nested arrays under key 1
		b := []byte{0x82, 0x01}
		b = append(b, bytes.Repeat([]byte{0x91}, levels)...)
		b = append(b, 0xc0, 30)
		return append(b, pack(t, mp(1, "a"))...)
	}
	if _, ok := Extract(nest(MaxDepth - 1)); !ok { // deepest array at MaxDepth
		t.Fatal("nesting at MaxDepth refused")
	}
	if _, ok := Extract(nest(MaxDepth)); ok {
		t.Fatal("nesting beyond MaxDepth accepted")
	}
}

func TestStringsAreCleaned(t *testing.T) {
	payload := pack(t, mp(30, mp(1, "a\x00b", 2, "t\xffx", 3, []string{"\xc3"},
		10, mp(2, "r\x00", 60, mp("k\x00", "v\xfe")))))
	m, ok := Extract(payload)
	want := Metadata{ClientTag: sp("a\uFFFDb"), Title: sp("t\uFFFDx"), Labels: []string{"\uFFFD"},
		Provenance: &Provenance{SpawnReason: sp("r\uFFFD"), Env: map[string]string{"k\uFFFD": "v\uFFFD"}}}
	if !ok || !reflect.DeepEqual(m, want) {
		t.Fatalf("Extract = %s; want %s", js(m), js(want))
	}
}

func TestCleanText(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"héllo wörld 日本語 🎉", "héllo wörld 日本語 🎉"},
		{"a\x00b", "a\uFFFDb"},
		{"\x00\x00", "\uFFFD\uFFFD"},
		{"a\xffb", "a\uFFFDb"},
		{"a\xff\xfe\xfdb", "a\uFFFDb"},   // one replacement per invalid run
		{"\xe6\x97", "\uFFFD"},           // truncated multi-byte sequence
		{"\xed\xa0\x80", "\uFFFD"},       // UTF-16 surrogate
		{"\xc0\x80", "\uFFFD"},           // overlong NUL
		{"x\xff\x00y", "x\uFFFD\uFFFDy"}, // invalid run then NUL
		{"\uFFFD", "\uFFFD"},
	}
	for _, c := range cases {
		if got := CleanText(c.in); got != c.want {
			t.Errorf("CleanText(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}

// jsonKeys returns the keys of the JSON object b in order.
func jsonKeys(t testing.TB, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	var keys []string
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", b)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestProvenanceJSON(t *testing.T) {
	wantKeys := []string{"parent_context_id", "spawn_reason", "root_context_id", "trace_id", "span_id",
		"correlation_id", "on_behalf_of", "on_behalf_of_source", "on_behalf_of_email", "writer_method",
		"writer_subject", "writer_issuer", "service_name", "service_version", "service_instance_id",
		"process_pid", "process_owner", "host_name", "host_arch", "client_address", "client_port",
		"env", "sdk_name", "sdk_version", "captured_at"}
	allNull := `{"parent_context_id":null,"spawn_reason":null,"root_context_id":null,"trace_id":null,` +
		`"span_id":null,"correlation_id":null,"on_behalf_of":null,"on_behalf_of_source":null,` +
		`"on_behalf_of_email":null,"writer_method":null,"writer_subject":null,"writer_issuer":null,` +
		`"service_name":null,"service_version":null,"service_instance_id":null,"process_pid":null,` +
		`"process_owner":null,"host_name":null,"host_arch":null,"client_address":null,` +
		`"client_port":null,"env":null,"sdk_name":null,"sdk_version":null,"captured_at":null}`
	full := `{"parent_context_id":"18446744073709551615","spawn_reason":"fork","root_context_id":"3",` +
		`"trace_id":"t","span_id":"s","correlation_id":"c","on_behalf_of":"u","on_behalf_of_source":"oidc",` +
		`"on_behalf_of_email":"u@example.com","writer_method":"m","writer_subject":"sub","writer_issuer":"iss",` +
		`"service_name":"svc","service_version":"1.0","service_instance_id":"uuid","process_pid":4242,` +
		`"process_owner":"root","host_name":"h","host_arch":"arm64","client_address":"10.0.0.1",` +
		`"client_port":9009,"env":{"A":"1","B":"2"},"sdk_name":"cxdb-go","sdk_version":"0.1",` +
		`"captured_at":1700000000000}`
	cases := []struct {
		name string
		p    *Provenance
		want string
	}{
		{"nil", nil, "null"},
		{"empty", &Provenance{}, allNull},
		{"partial", &Provenance{SpawnReason: sp("")}, strings.Replace(allNull, `"spawn_reason":null`, `"spawn_reason":""`, 1)},
		{"full", &fullProvenance, full},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.p)
			if err != nil || string(b) != c.want {
				t.Fatalf("json = %s, %v\nwant   %s", b, err, c.want)
			}
			if c.p == nil {
				return
			}
			if keys := jsonKeys(t, b); !reflect.DeepEqual(keys, wantKeys) {
				t.Fatalf("keys = %v", keys)
			}
			var back Provenance
			if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(&back, c.p) {
				t.Fatalf("round trip = %+v, %v", back, err)
			}
		})
	}
}

// Provenance stored before ids became strings holds numbers: it reads back.
func TestProvenanceReadsNumericIDs(t *testing.T) {
	var p Provenance
	if err := json.Unmarshal([]byte(`{"parent_context_id":18446744073709551615,"root_context_id":"3"}`), &p); err != nil {
		t.Fatal(err)
	}
	if *p.ParentContextID != math.MaxUint64 || *p.RootContextID != 3 {
		t.Errorf("ids = %d %d", *p.ParentContextID, *p.RootContextID)
	}
	if err := json.Unmarshal([]byte(`{"parent_context_id":"-1"}`), &p); err == nil {
		t.Error("a negative id was read")
	}
}
