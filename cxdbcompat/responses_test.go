package cxdbcompat

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleTurns() []TurnRecord {
	return []TurnRecord{
		{
			TurnID: 1, ParentTurnID: 0, Depth: 1, DeclaredTypeID: "cxdb.ConversationItem",
			DeclaredTypeVersion: 3, Encoding: 1, Compression: 0, UncompressedLen: 2,
			ContentHash: repeatHash(7), Payload: []byte{0x91, 0x01},
		},
		{
			TurnID: 2, ParentTurnID: 1, Depth: 2, DeclaredTypeID: "",
			Encoding: 1, Compression: 1, UncompressedLen: 500, ContentHash: repeatHash(8),
			Payload: []byte{},
		},
	}
}

// responseCase is one encoder/decoder pair exercised by the response tests.
type responseCase struct {
	name   string
	value  any
	size   int // expected encoded size, -1 for variable
	encode func() []byte
	decode func([]byte) (any, error)
}

func decoded[T any](v T, err error) (any, error) { return v, err }

func responseCases() []responseCase {
	hello := HelloResponse{SessionID: 12, ProtocolVersion: 1}
	head := HeadResponse{ContextID: 1, HeadTurnID: 2, HeadDepth: 3}
	app := AppendTurnResponse{ContextID: 1, NewTurnID: 2, NewDepth: 3, ContentHash: repeatHash(9)}
	blob := GetBlobResponse{Data: []byte("blob data")}
	attach := AttachFSResponse{TurnID: 4, FSRootHash: repeatHash(10)}
	putNew := PutBlobResponse{Hash: repeatHash(11), WasNew: true}
	putOld := PutBlobResponse{Hash: repeatHash(11)}
	errResp := ErrorResponse{Code: 404, Kind: "NOT_FOUND", Message: `context 7 "x" not found`}
	turns := sampleTurns()
	return []responseCase{
		{"hello", hello, 10, func() []byte { return hello.AppendTo(nil) }, func(p []byte) (any, error) { return decoded(DecodeHelloResponse(p)) }},
		{"head", head, 20, func() []byte { return head.AppendTo(nil) }, func(p []byte) (any, error) { return decoded(DecodeHeadResponse(p)) }},
		{"append", app, 52, func() []byte { return app.AppendTo(nil) }, func(p []byte) (any, error) { return decoded(DecodeAppendTurnResponse(p)) }},
		{"get_blob", blob, 13, func() []byte { return blob.AppendTo(nil) }, func(p []byte) (any, error) { return decoded(DecodeGetBlobResponse(p)) }},
		{"attach_fs", attach, 40, func() []byte { return attach.AppendTo(nil) }, func(p []byte) (any, error) { return decoded(DecodeAttachFSResponse(p)) }},
		{"put_blob new", putNew, 33, func() []byte { return putNew.AppendTo(nil) }, func(p []byte) (any, error) { return decoded(DecodePutBlobResponse(p)) }},
		{"put_blob old", putOld, 33, func() []byte { return putOld.AppendTo(nil) }, func(p []byte) (any, error) { return decoded(DecodePutBlobResponse(p)) }},
		{"error", errResp, -1, func() []byte { return errResp.AppendTo(nil) }, func(p []byte) (any, error) { return decoded(DecodeErrorResponse(p)) }},
		{"turn list", turns, -1, func() []byte { return AppendTurnList(nil, turns) }, func(p []byte) (any, error) { return decoded(DecodeTurnList(p)) }},
		{"empty turn list", []TurnRecord{}, 4, func() []byte { return AppendTurnList(nil, nil) }, func(p []byte) (any, error) { return decoded(DecodeTurnList(p)) }},
	}
}

func TestResponseRoundTrip(t *testing.T) {
	for _, tc := range responseCases() {
		t.Run(tc.name, func(t *testing.T) {
			payload := tc.encode()
			if tc.size >= 0 && len(payload) != tc.size {
				t.Errorf("encoded %d bytes, want %d", len(payload), tc.size)
			}
			got, err := tc.decode(payload)
			if err != nil {
				t.Fatalf("decode %x: %v", payload, err)
			}
			if !reflect.DeepEqual(got, tc.value) {
				t.Fatalf("round trip\n got %#v\nwant %#v", got, tc.value)
			}
		})
	}
}

func TestResponseEncodingsAreAppendOnly(t *testing.T) {
	for _, tc := range responseCases() {
		prefix := []byte("pre")
		var out []byte
		switch v := tc.value.(type) {
		case interface{ AppendTo([]byte) []byte }:
			out = v.AppendTo(prefix)
		case []TurnRecord:
			out = AppendTurnList(prefix, v)
		}
		if string(out[:3]) != "pre" || string(out[3:]) != string(tc.encode()) {
			t.Errorf("%s: AppendTo did not append after the prefix", tc.name)
		}
	}
}

func TestEncodersDoNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 4096)
	turns := sampleTurns()
	allocs := testing.AllocsPerRun(100, func() {
		b := HeadResponse{ContextID: 1}.AppendTo(buf[:0])
		b = AppendTurnResponse{NewTurnID: 2}.AppendTo(b)
		b = AppendTurnList(b, turns)
		b = ErrorResponse{Code: 404, Kind: "NOT_FOUND", Message: "x\n\"y\""}.AppendTo(b)
		b = AppendTurnRequest{DeclaredTypeID: "t", Payload: []byte{1}}.AppendTo(b)
		b, start := StartFrame(b, MsgGetHead, 0, 1)
		b = HelloResponse{SessionID: 1}.AppendTo(b)
		_, _ = FinishFrame(b, start)
	})
	if allocs != 0 {
		t.Errorf("encoders allocated %.1f times per run", allocs)
	}
}

func TestTurnRecordLayout(t *testing.T) {
	rec := TurnRecord{TurnID: 1, ParentTurnID: 2, Depth: 3, DeclaredTypeID: "T", DeclaredTypeVersion: 4,
		Encoding: 5, Compression: 6, UncompressedLen: 7, ContentHash: repeatHash(0xCC)}
	want := "0100000000000000" + "0200000000000000" + "03000000" + "01000000" + "54" +
		"04000000" + "05000000" + "06000000" + "07000000" + strings.Repeat("cc", 32) +
		"00000000" // payload_len always present, 0 when no payload
	if got := hex.EncodeToString(rec.AppendTo(nil)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestDecodeTurnListErrors(t *testing.T) {
	one := AppendTurnList(nil, sampleTurns()[:1])
	tests := []struct {
		name    string
		payload []byte
		msg     string
	}{
		{"empty", nil, "turn list: payload truncated reading count"},
		{"count without items", []byte{1, 0, 0, 0}, "payload truncated reading turn_id"},
		{"huge count", []byte{0xff, 0xff, 0xff, 0xff}, "payload truncated reading turn_id"},
		{"missing payload_len", one[:len(one)-6], "payload truncated reading payload"},
		{"payload cut", one[:len(one)-1], "payload truncated reading payload"},
		{"count larger than items", append([]byte{2, 0, 0, 0}, one[4:]...), "payload truncated reading turn_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			turns, err := DecodeTurnList(tc.payload)
			if !errors.Is(err, ErrMalformed) || turns != nil {
				t.Fatalf("got %v, %v; want nil, ErrMalformed", turns, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("message %q does not contain %q", err, tc.msg)
			}
		})
	}
}

func TestDecodeHelloResponseLenient(t *testing.T) {
	r, err := DecodeHelloResponse([]byte{5, 0, 0, 0, 0, 0, 0, 0})
	if err != nil || r.SessionID != 5 || r.ProtocolVersion != 0 {
		t.Fatalf("8-byte hello response: %+v, %v", r, err)
	}
	if _, err := DecodeHelloResponse(make([]byte, 7)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("7-byte hello response: err = %v", err)
	}
}

func TestDecodePutBlobWasNewOnlyOne(t *testing.T) {
	p := append(make([]byte, 32), 2)
	r, err := DecodePutBlobResponse(p)
	if err != nil || r.WasNew {
		t.Fatalf("was_new byte 2: %+v, %v (official client treats only 1 as new)", r, err)
	}
}

func TestErrorResponseDetail(t *testing.T) {
	tests := []struct {
		name   string
		detail string
		want   ErrorResponse
	}{
		{"cardbox json", `{"code":"NOT_FOUND","message":"context 7 not found"}`, ErrorResponse{Code: 404, Kind: "NOT_FOUND", Message: "context 7 not found"}},
		{"cardbox json with details", `{"code":"CONFLICT","message":"m","details":{"original_turn_id":"7","differs":["payload"]}}`,
			ErrorResponse{Code: 404, Kind: "CONFLICT", Message: "m", Details: map[string]any{"original_turn_id": "7", "differs": []any{"payload"}}}},
		{"details not an object", `{"code":"X","message":"m","details":[1]}`, ErrorResponse{Code: 404, Kind: "X", Message: "m"}},
		{"reference plain text", "unknown msg_type", ErrorResponse{Code: 404, Message: "unknown msg_type"}},
		{"json without message", `{"code":"X"}`, ErrorResponse{Code: 404, Message: `{"code":"X"}`}},
		{"json numeric code", `{"code":404,"message":"m"}`, ErrorResponse{Code: 404, Message: "m"}},
		{"broken json", `{"code":`, ErrorResponse{Code: 404, Message: `{"code":`}},
		{"empty", "", ErrorResponse{Code: 404}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := appendStr32(appendU32(nil, 404), tc.detail)
			got, err := DecodeErrorResponse(p)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestErrorResponseEncodesJSON(t *testing.T) {
	tests := []ErrorResponse{
		{Code: 422, Kind: "INVALID", Message: "plain"},
		{Code: 422, Kind: "", Message: ""},
		{Code: 500, Kind: "K\"\\", Message: "ctl \x00\x01\x1f\t\r\n quote \" back \\ uni é 世 \u2028\u2029 </script>"},
		{Code: 500, Kind: "bad", Message: "invalid \xff utf8 \xe2 end"},
		{Code: 422, Kind: "<&>", Message: "html <a href='x'>&amp;</a> bs \b ff \f"},
		{Code: 409, Kind: "CONFLICT", Message: "reused", Details: map[string]any{"original_turn_id": "12"}},
	}
	for _, tc := range tests {
		p := tc.AppendTo(nil)
		d := newDecoder("test", p)
		_ = d.u32("code")
		detail := d.bin32("detail")
		if d.err != nil {
			t.Fatal(d.err)
		}
		var v struct{ Code, Message string }
		if err := json.Unmarshal(detail, &v); err != nil {
			t.Fatalf("detail %q is not JSON: %v", detail, err)
		}
		if tc.Details == nil { // the bytes encoding/json writes, <, > and & escaped
			want, err := json.Marshal(struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			}{tc.Kind, tc.Message})
			if err != nil || string(detail) != string(want) {
				t.Errorf("detail = %s, encoding/json writes %s (%v)", detail, want, err)
			}
		}
		wantMsg := strings.ToValidUTF8(tc.Message, "\uFFFD")
		if v.Code != tc.Kind || v.Message != wantMsg {
			t.Errorf("JSON detail = %+v, want code %q message %q", v, tc.Kind, wantMsg)
		}
		got, err := DecodeErrorResponse(p)
		if err != nil || got.Code != tc.Code || got.Kind != tc.Kind || got.Message != wantMsg || !reflect.DeepEqual(got.Details, tc.Details) {
			t.Errorf("decode = %+v, %v", got, err)
		}
	}
}

func TestDecodeErrorResponseMalformed(t *testing.T) {
	for _, p := range [][]byte{nil, {1, 2, 3}, {0, 0, 0, 0, 5, 0, 0, 0, 'a'}} {
		if _, err := DecodeErrorResponse(p); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeErrorResponse(%x) err = %v", p, err)
		}
	}
}
