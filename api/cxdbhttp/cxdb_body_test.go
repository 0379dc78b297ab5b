package cxdbhttp

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/api/internal/jsonbody"
)

// The CXDB HTTP API's request bodies: a bad one is a 400 naming its field,
// never a panic (an id that is not a decimal made jsonKind dereference a
// nil type: a 500 from the recovered panic).
func TestDecodeStrictBodyNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		into       func() any
		want       string // in the message; "" for no error
	}{
		{"fork from a word", `{"base_turn_id":"abc"}`, func() any { return &createRequest{} },
			`field "base_turn_id": expected a decimal id (a string or a number), got JSON "abc"`},
		{"fork from a negative", `{"base_turn_id":-1}`, func() any { return &createRequest{} },
			`field "base_turn_id": expected a decimal id`},
		{"fork from an object", `{"base_turn_id":{}}`, func() any { return &createRequest{} },
			`field "base_turn_id": expected a decimal id`},
		{"append under a word", `{"type_id":"t","parent_turn_id":"x"}`, func() any { return &turnAppendRequest{} },
			`field "parent_turn_id": expected a decimal id`},
		{"version as a string", `{"type_id":"t","type_version":"3"}`, func() any { return &turnAppendRequest{} },
			`field "type_version": expected an integer, got JSON string`},
		{"unknown member", `{"type_id":"t","typo":1}`, func() any { return &turnAppendRequest{} }, `unknown field "typo"`},
		// encoding/json would repair or let these through.
		{"invalid UTF-8 in data", "{\"type_id\":\"t\",\"data\":{\"text\":\"a\xffb\"}}", func() any { return &turnAppendRequest{} },
			`data.text: `},
		{"lone surrogate in data", `{"type_id":"t","data":{"text":"a\ud800b"}}`, func() any { return &turnAppendRequest{} }, `data.text: `},
		{"lone surrogate in the idempotency key", `{"type_id":"t","idempotency_key":"\udc00"}`, func() any { return &turnAppendRequest{} },
			`idempotency_key: `},
		{"NUL in data", `{"type_id":"t","data":{"text":"a\u0000b"}}`, func() any { return &turnAppendRequest{} }, `data.text: `},
		{"repeated member", `{"base_turn_id":"0","base_turn_id":"1"}`, func() any { return &createRequest{} }, `base_turn_id`},
		{"ids as strings and numbers", `{"base_turn_id":"12"}`, func() any { return &createRequest{} }, ""},
		{"id as a number", `{"type_id":"t","parent_turn_id":7}`, func() any { return &turnAppendRequest{} }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := jsonbody.DecodeStrictBody([]byte(tc.body), tc.into())
			switch {
			case tc.want == "" && e != nil:
				t.Fatalf("refused: %v", e)
			case tc.want == "":
			case e == nil:
				t.Fatalf("accepted, want a 400 saying %q", tc.want)
			case e.Kind.Status() != http.StatusBadRequest || !strings.Contains(e.Message, tc.want):
				t.Fatalf("got %v, want a 400 saying %q", e, tc.want)
			case e.Details["field"] == nil && !strings.HasPrefix(tc.want, "field "):
				t.Errorf("%v: no details.field", e)
			}
		})
	}
}

// FuzzDecodeStrictBody: whatever the body, decoding a CXDB request body
// does not panic, and a refusal is a 400.
func FuzzDecodeStrictBody(f *testing.F) {
	for _, seed := range []string{
		`{"base_turn_id":"abc"}`, `{"base_turn_id":12}`, `{"type_id":"t","type_version":3,"data":{},"parent_turn_id":"5"}`,
		`{"parent_turn_id":1e400}`, `{"idempotency_key":"\ud800"}`, `{"data":[`, `[]`, `null`, `{"base_turn_id":null}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, v := range []any{&createRequest{}, &turnAppendRequest{}} {
			if e := jsonbody.DecodeStrictBody([]byte(body), v); e != nil && e.Kind.Status() != http.StatusBadRequest {
				t.Fatalf("%q: %v, want a 400", body, e)
			}
		}
	})
}
