package cxdbcompat

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// sampleRequests returns one non-trivial value of every request type.
func sampleRequests() []Request {
	return []Request{
		HelloRequest{Legacy: true},
		HelloRequest{ProtocolVersion: 1, ClientTag: "tägged", ClientMetaJSON: []byte(`{"api_key":"k"}`)},
		CtxCreateRequest{BaseTurnID: 1<<64 - 1},
		CtxForkRequest{BaseTurnID: 9},
		GetHeadRequest{ContextID: 3},
		AppendTurnRequest{
			ContextID: 1, ParentTurnID: 2, DeclaredTypeID: "a.B", DeclaredTypeVersion: 4,
			Encoding: EncodingMsgpack, Compression: CompressionZstd, UncompressedLen: 1000,
			ContentHash: repeatHash(1), Payload: []byte{1, 2, 3}, IdempotencyKey: []byte("k"),
		},
		AppendTurnRequest{
			DeclaredTypeID: "", Payload: []byte{}, IdempotencyKey: []byte{},
			HasFSRoot: true, FSRootHash: repeatHash(2),
		},
		GetLastRequest{ContextID: 5, Limit: 100, IncludePayload: true},
		GetBeforeRequest{ContextID: 5, BeforeTurnID: 77, Limit: 3, IncludePayload: false},
		GetBeforeRequest{ContextID: 5, BeforeTurnID: 77, Limit: 3, IncludePayload: true},
		GetBlobRequest{Hash: repeatHash(3)},
		AttachFSRequest{TurnID: 8, FSRootHash: repeatHash(4)},
		PutBlobRequest{Hash: repeatHash(5), Data: []byte("blob")},
		PutBlobRequest{Hash: repeatHash(5), Data: []byte{}},
	}
}

func TestRequestRoundTrip(t *testing.T) {
	for _, req := range sampleRequests() {
		t.Run(req.MsgType().String(), func(t *testing.T) {
			payload := req.AppendTo(nil)
			got, err := DecodeRequest(req.MsgType(), req.Flags(), payload)
			if err != nil {
				t.Fatalf("decode %x: %v", payload, err)
			}
			if !reflect.DeepEqual(got, req) {
				t.Fatalf("round trip\n got %#v\nwant %#v", got, req)
			}
			// Trailing bytes are ignored except for GET_BLOB.
			withTrailer := append(req.AppendTo(nil), 0xFF, 0xFE)
			got, err = DecodeRequest(req.MsgType(), req.Flags(), withTrailer)
			if req.MsgType() == MsgGetBlob {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("GET_BLOB with trailing bytes: err = %v", err)
				}
				return
			}
			if h, ok := req.(HelloRequest); ok && h.Legacy {
				return // a non-empty payload is no longer the legacy form
			}
			if err != nil || !reflect.DeepEqual(got, req) {
				t.Fatalf("with trailing bytes: got %#v, err %v", got, err)
			}
		})
	}
}

func TestRequestEncodedSizes(t *testing.T) {
	tests := []struct {
		req  Request
		want int
	}{
		{HelloRequest{ProtocolVersion: 1, ClientTag: "test-client"}, 19},
		{CtxCreateRequest{}, 8},
		{CtxForkRequest{}, 8},
		{GetHeadRequest{}, 8},
		{AppendTurnRequest{DeclaredTypeID: "cxdb.ConversationItem", Payload: []byte{1, 2}}, 99},
		{AppendTurnRequest{DeclaredTypeID: "abc", Payload: []byte{1}, IdempotencyKey: []byte("xy"), HasFSRoot: true}, 76 + 3 + 1 + 2 + 32},
		{GetLastRequest{}, 16},
		{GetBeforeRequest{}, 24},
		{GetBlobRequest{}, 32},
		{AttachFSRequest{}, 40},
		{PutBlobRequest{Data: []byte("0123456789")}, 46},
	}
	for _, tc := range tests {
		if got := len(tc.req.AppendTo(nil)); got != tc.want {
			t.Errorf("%s: %d bytes, want %d", tc.req.MsgType(), got, tc.want)
		}
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	goodAppend := AppendTurnRequest{DeclaredTypeID: "t", Payload: []byte{1}, IdempotencyKey: []byte("key")}.AppendTo(nil)
	badUTF8Append := AppendTurnRequest{DeclaredTypeID: "\xff\xfe"}.AppendTo(nil)
	tests := []struct {
		name    string
		typ     MsgType
		flags   uint16
		payload []byte
		want    error
		msg     string // substring of the error message
	}{
		{"hello 1 byte", MsgHello, 0, []byte{1}, ErrMalformed, "hello: hello payload too short"},
		{"hello 3 bytes", MsgHello, 0, []byte{1, 0, 0}, ErrMalformed, "too short"},
		{"hello no meta length", MsgHello, 0, []byte{1, 0, 0, 0}, ErrMalformed, "hello: payload truncated reading client_meta_json"},
		{"hello tag truncated", MsgHello, 0, []byte{1, 0, 5, 0, 'a'}, ErrMalformed, "reading client_tag"},
		{"hello meta truncated", MsgHello, 0, []byte{1, 0, 0, 0, 3, 0, 0, 0, '{'}, ErrMalformed, "reading client_meta_json"},
		{"hello tag not utf8", MsgHello, 0, []byte{1, 0, 1, 0, 0xff, 0, 0, 0, 0}, ErrMalformed, "client_tag not utf8"},
		{"hello meta not utf8", MsgHello, 0, []byte{1, 0, 0, 0, 1, 0, 0, 0, 0xff}, ErrMalformed, "client_meta_json not utf8"},
		{"ctx_create short", MsgCtxCreate, 0, make([]byte, 7), ErrMalformed, "ctx_create: payload truncated reading base_turn_id"},
		{"ctx_fork short", MsgCtxFork, 0, nil, ErrMalformed, "ctx_fork: payload truncated reading base_turn_id"},
		{"get_head short", MsgGetHead, 0, []byte{1}, ErrMalformed, "get_head: payload truncated reading context_id"},
		{"append no key", MsgAppendTurn, 0, goodAppend[:len(goodAppend)-7], ErrMalformed, "append_turn: payload truncated reading idempotency_key"},
		{"append key cut", MsgAppendTurn, 0, goodAppend[:len(goodAppend)-1], ErrMalformed, "append_turn: payload truncated reading idempotency_key"},
		{"append fs root missing", MsgAppendTurn, FlagFSRoot, goodAppend, ErrMalformed, "append_turn: payload truncated reading fs_root_hash"},
		{"append type id not utf8", MsgAppendTurn, 0, badUTF8Append, ErrMalformed, "append_turn: declared_type_id not utf8"},
		{"append huge type id len", MsgAppendTurn, 0, append(make([]byte, 16), 0xff, 0xff, 0xff, 0xff), ErrMalformed, "reading declared_type_id"},
		{"get_last short", MsgGetLast, 0, make([]byte, 15), ErrMalformed, "get_last: payload truncated reading include_payload"},
		{"get_before short", MsgGetBefore, 0, make([]byte, 23), ErrMalformed, "get_before: payload truncated reading include_payload"},
		{"get_blob short", MsgGetBlob, 0, make([]byte, 31), ErrMalformed, "get_blob: invalid blob hash length 31 (want 32)"},
		{"get_blob long", MsgGetBlob, 0, make([]byte, 33), ErrMalformed, "invalid blob hash length 33"},
		{"attach_fs short", MsgAttachFS, 0, make([]byte, 39), ErrMalformed, "attach_fs: payload truncated reading fs_root_hash"},
		{"put_blob short", MsgPutBlob, 0, make([]byte, 35), ErrMalformed, "put_blob: payload truncated reading data"},
		{"put_blob data cut", MsgPutBlob, 0, append(make([]byte, 32), 2, 0, 0, 0, 'x'), ErrMalformed, "put_blob: payload truncated reading data"},
		{"range by depth", MsgGetRangeByDepth, 0, nil, ErrUnknownMessage, "GET_RANGE_BY_DEPTH"},
		{"error frame", MsgError, 0, nil, ErrUnknownMessage, "ERROR"},
		{"zero type", 0, 0, nil, ErrUnknownMessage, "MsgType(0)"},
		{"type 12", 12, 0, nil, ErrUnknownMessage, "MsgType(12)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := DecodeRequest(tc.typ, tc.flags, tc.payload)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if req != nil {
				t.Errorf("request = %#v, want nil on error", req)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("message %q does not contain %q", err, tc.msg)
			}
		})
	}
}

func TestMalformedErrorFields(t *testing.T) {
	_, err := DecodeAppendTurnRequest(0, make([]byte, 20))
	var me *MalformedError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v, want *MalformedError", err)
	}
	if me.Op != "append_turn" || me.Field != "declared_type_version" {
		t.Errorf("MalformedError = %+v", me)
	}
}

func TestHelloValidate(t *testing.T) {
	tests := []struct {
		name string
		req  HelloRequest
		ok   bool
	}{
		{"ok", HelloRequest{ClientTag: "t", ClientMetaJSON: []byte("{}")}, true},
		{"long tag", HelloRequest{ClientTag: strings.Repeat("x", 1<<16)}, false},
		{"bad tag", HelloRequest{ClientTag: "\xff"}, false},
		{"bad meta", HelloRequest{ClientMetaJSON: []byte{0xff}}, false},
	}
	for _, tc := range tests {
		if err := tc.req.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v", tc.name, err)
		}
	}
}

// TestDecodedSlicesCannotClobber checks that appending to a decoded slice
// does not overwrite the bytes that follow it in the payload.
func TestDecodedSlicesCannotClobber(t *testing.T) {
	req := AppendTurnRequest{DeclaredTypeID: "t", Payload: []byte{1, 2}, IdempotencyKey: []byte("key")}
	payload := req.AppendTo(nil)
	got, err := DecodeAppendTurnRequest(0, payload)
	if err != nil {
		t.Fatal(err)
	}
	_ = append(got.Payload, 9, 9, 9, 9, 9, 9, 9)
	again, err := DecodeAppendTurnRequest(0, payload)
	if err != nil || string(again.IdempotencyKey) != "key" {
		t.Fatalf("payload clobbered: %q, %v", again.IdempotencyKey, err)
	}
}
