package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, payload := range [][]byte{nil, {1}, bytes.Repeat([]byte{7}, 1000)} {
		b, err := AppendFrame(nil, MsgAppend, FlagFSRoot, 42, payload)
		if err != nil {
			t.Fatal(err)
		}
		f, err := ReadFrame(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != MsgAppend || f.Flags != FlagFSRoot || f.ReqID != 42 || !bytes.Equal(f.Payload, payload) {
			t.Fatalf("round trip: got %+v", f)
		}
	}
}

func TestReadFrameRefusesOversize(t *testing.T) {
	h := le.AppendUint32(nil, MaxPayload+1)
	h = append(h, make([]byte, 12)...)
	if _, err := ReadFrame(bytes.NewReader(h)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("got %v, want ErrFrameTooLarge", err)
	}
}

func TestAppendLayout(t *testing.T) {
	// The official client's fixture append_parent0 is 99 bytes: a 7-byte
	// type id, a 16-byte payload and no key (76 + L + P + K).
	p, flags := Append{TypeID: "test:Ab", Payload: make([]byte, 16)}.Encode()
	if len(p) != 99 || flags != 0 {
		t.Fatalf("len %d flags %d, want 99 and 0", len(p), flags)
	}
	root := Hash{1}
	p, flags = Append{TypeID: "x", IdempotencyKey: "k", FSRoot: &root}.Encode()
	if len(p) != 76+1+1+32 || flags != FlagFSRoot {
		t.Fatalf("with fs root: len %d flags %d", len(p), flags)
	}
}

func TestDecodeTurns(t *testing.T) {
	rec := func(id uint64, typ string, payload []byte) []byte {
		b := le.AppendUint64(nil, id)
		b = le.AppendUint64(b, id-1)
		b = le.AppendUint32(b, uint32(id))
		b = le.AppendUint32(b, uint32(len(typ)))
		b = append(b, typ...)
		b = append(b, make([]byte, 16+HashSize)...)
		b = le.AppendUint32(b, uint32(len(payload)))
		return append(b, payload...)
	}
	tests := []struct {
		name    string
		in      []byte
		want    int
		wantErr bool
	}{
		{"empty list", le.AppendUint32(nil, 0), 0, false},
		{"two with padding", append(append(append(le.AppendUint32(nil, 2), rec(1, "a", []byte{1})...), rec(2, "", nil)...), 0), 2, false},
		{"count beyond bytes", le.AppendUint32(nil, 1<<30), 0, true},
		{"truncated record", append(le.AppendUint32(nil, 1), rec(1, "abc", []byte{1, 2})[:50]...), 0, true},
		{"no count", nil, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeTurns(tt.in)
			if (err != nil) != tt.wantErr || len(got) != tt.want {
				t.Fatalf("got %d turns, err %v", len(got), err)
			}
		})
	}
}

func TestDecodeError(t *testing.T) {
	frame := func(code uint32, detail string) []byte {
		b := le.AppendUint32(nil, code)
		b = le.AppendUint32(b, uint32(len(detail)))
		return append(b, detail...)
	}
	e := DecodeError(frame(409, `{"code":"CONFLICT","message":"key reused","details":{"original_turn_id":"7"}}`))
	if e.Code != 409 || e.Kind != "CONFLICT" || e.Message != "key reused" || e.Details["original_turn_id"] != "7" {
		t.Fatalf("json detail: %+v", e)
	}
	if e := DecodeError(frame(422, "unknown msg_type")); e.Message != "unknown msg_type" || e.Kind != "" {
		t.Fatalf("text detail: %+v", e)
	}
	if e := DecodeError([]byte{1, 2}); e.Message == "" {
		t.Fatalf("short frame: %+v", e)
	}
}

// FuzzDecodeResponses feeds arbitrary bytes to every decoder of answers
// from the network: none may panic or allocate past the input.
func FuzzDecodeResponses(f *testing.F) {
	f.Add([]byte{})
	f.Add(le.AppendUint32(nil, 3))
	f.Add(make([]byte, 52))
	f.Add(append(le.AppendUint32(nil, 404), le.AppendUint32(nil, 2)...))
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _ = DecodeHead(p)
		_, _ = DecodeAppended(p)
		turns, err := DecodeTurns(p)
		if err == nil && len(turns)*minTurnSize > len(p) {
			t.Fatalf("%d turns from %d bytes", len(turns), len(p))
		}
		_, _ = DecodeBlob(p)
		_, _, _ = DecodePutBlob(p)
		_, _, _ = DecodeHello(p)
		_ = DecodeError(p)
	})
}

// FuzzReadFrame reads frames from arbitrary bytes.
func FuzzReadFrame(f *testing.F) {
	b, _ := AppendFrame(nil, MsgHello, 0, 1, Hello("t", nil))
	f.Add(b)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, p []byte) {
		r := bytes.NewReader(p)
		for {
			fr, err := ReadFrame(r)
			if err != nil {
				return
			}
			if len(fr.Payload) > MaxPayload {
				t.Fatal("payload over the cap")
			}
		}
	})
}
