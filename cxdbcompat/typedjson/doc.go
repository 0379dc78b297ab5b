// Package typedjson encodes the typed JSON of a CXDB HTTP write
// (POST /v1/contexts/{id}/append, body field "data") into the msgpack payload
// that the official Go client would have written for the same values (see the
// cardbox CXDB compatibility reference, §5.3 for the projection this inverts
// and §9 for the Go client's wire encoding).
//
// The input is a JSON object keyed by the FIELD NAMES of a registered type
// version. The output is a msgpack map keyed by the decimal-string tags
// ("1", "10", ...), with entries sorted by tag numerically, so the same data
// always yields the same bytes whatever the JSON key order.
//
// # Value encodings by field type
//
//	int64 unix_ms time_ms timestamp_ms   int64, always 9 bytes (d3)
//	u64 uint64                           uint64, always 9 bytes (cf)
//	u32 uint32                           uint32 (ce)
//	int32                                int32 (d2)
//	u8 uint8                             uint8 (cc)
//	string, bool                         str, bool
//	bytes typed_blob                     bin (input: std base64, padded)
//	array                                array; items by the field's items spec
//	ref (with a ref type id)             nested map by the latest version of
//	                                     the referenced type, same rules
//	anything else (map, any, int, ...)   generic: objects become maps with
//	                                     sorted string keys, integers the
//	                                     smallest msgpack int, other numbers
//	                                     float64
//
// JSON null encodes as msgpack nil for every type. The typed view's own
// renderings are accepted back: u64 and int64 values as decimal strings or
// numbers; enum fields as the label, the number or {"label":..,"value":..};
// time fields as RFC 3339 strings (sub-millisecond digits are truncated) or
// unix milliseconds; bytes as std base64. Integer fields accept a JSON number
// with a fraction or exponent only when its value is an exact integer.
//
// # Differences from the Go client
//
// The Go client writes every field of its structs, unset ones as nil or zero
// values. An HTTP write stores only the fields present in the JSON object;
// absent fields are omitted, which the projection renders identically (absent
// tags are omitted from the typed view either way, and zero values are not
// invented). Go int fields (turn_number, exit_code) are written compactly by
// the Go client; a registry that types them as anything the projection
// renders generically (for example "int") reproduces those bytes, whereas
// "int64" writes d3.
//
// A generic field cannot be inverted exactly from the default rendering: the
// projection renders non-negative integers inside generic values as strings,
// and such strings are written back as msgpack strings.
//
// # Errors
//
// Data that is not a single JSON object yields an error wrapping ErrNotObject.
// Every other rejection is a *FieldError naming the offending field by its
// dotted path (for example "turn.tool_calls[2].status"). Nesting deeper than
// MaxDepth objects and arrays is rejected.
package typedjson
