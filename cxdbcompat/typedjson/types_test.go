package typedjson

import "github.com/cardboxhq/cardbox/cxdbcompat/registry"

// fakeTypes is a map-backed Types for tests.
type fakeTypes struct {
	latest map[string]registry.Descriptor
	enums  map[string]map[string]string
}

func (f fakeTypes) Latest(id string) (registry.Descriptor, bool) {
	d, ok := f.latest[id]
	return d, ok
}

func (f fakeTypes) Enum(id string) (map[string]string, bool) {
	e, ok := f.enums[id]
	return e, ok
}

func str(name string) registry.Field { return registry.Field{Name: name, Type: "string"} }

func typed(name, typ string) registry.Field { return registry.Field{Name: name, Type: typ} }

func ref(name, id string) registry.Field { return registry.Field{Name: name, Type: "ref", Ref: id} }

func arrayOf(name string, items *registry.Items) registry.Field {
	return registry.Field{Name: name, Type: "array", Items: items}
}

func desc(id string, fields map[uint64]registry.Field) registry.Descriptor {
	return registry.Descriptor{TypeID: id, Version: 1, Fields: fields}
}

// allDesc has one field of every type the encoder distinguishes.
var allDesc = desc("test:All", map[uint64]registry.Field{
	1: typed("i64", "int64"), 2: typed("ums", "unix_ms"), 3: typed("tms", "time_ms"),
	4: typed("tsms", "timestamp_ms"), 5: typed("u64", "u64"), 6: typed("uint64", "uint64"),
	7: typed("u32", "u32"), 8: typed("uint32", "uint32"), 9: typed("i32", "int32"),
	10: typed("u8", "u8"), 11: typed("uint8", "uint8"), 12: str("s"),
	13: typed("b", "bool"), 14: typed("bytes", "bytes"), 15: typed("blob", "typed_blob"),
	16: arrayOf("arr", nil), 17: arrayOf("strs", &registry.Items{Type: "string"}),
	18: ref("inner", "test:Inner"), 19: arrayOf("inners", &registry.Items{Type: "ref", Ref: "test:Inner"}),
	20: typed("m", "map"), 21: {Name: "st", Type: "u8", Enum: "status"},
	22: {Name: "st64", Type: "u64", Enum: "status"}, 23: ref("nope", "test:Nope"),
	24: {Name: "stg", Type: "i64", Enum: "status"}, 25: typed("refless", "ref"),
	26: typed("u16", "u16"), 27: arrayOf("u8s", &registry.Items{Type: "u8"}),
	28: {Name: "stmiss", Type: "u8", Enum: "missing"}, 29: arrayOf("deep", &registry.Items{Type: "array"}),
	30: ref("self", "test:All"), 31: {Name: "sts", Type: "string", Enum: "status"},
	100: typed("big_tag", "string"),
})

var testTypes = fakeTypes{
	latest: map[string]registry.Descriptor{
		"test:All": allDesc,
		"test:Inner": desc("test:Inner", map[uint64]registry.Field{
			1: str("name"), 2: typed("n", "int64"), 3: {Name: "status", Type: "u8", Enum: "status"},
		}),
	},
	enums: map[string]map[string]string{
		"status": {"0": "pending", "1": "running", "2": "done", "7": "done", "05": "bogus"},
	},
}
