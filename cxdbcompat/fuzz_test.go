package cxdbcompat

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func FuzzReadFrame(f *testing.F) {
	for _, fx := range requestPayloads(f) {
		f.Add(AppendFrame(nil, fx.MsgType, fx.Flags, 7, fx.Payload))
	}
	f.Add(header(MaxPayload+1, MsgPutBlob, 1))
	f.Add(append(header(MaxPayload, MsgPutBlob, 1), 1, 2, 3))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := ReadFrame(bytes.NewReader(data), nil)
		if err != nil {
			if len(data) >= HeaderSize && le.Uint32(data) > MaxPayload && !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("oversize header not reported: %v", err)
			}
			return
		}
		if cap(fr.Payload) > max(2*len(data), readChunk) {
			t.Fatalf("payload cap %d for %d input bytes", cap(fr.Payload), len(data))
		}
		wire := AppendFrame(nil, fr.Type, fr.Flags, fr.ReqID, fr.Payload)
		if !bytes.HasPrefix(data, wire) {
			t.Fatalf("re-encoded frame %x is not a prefix of the input", wire)
		}
	})
}

func FuzzDecodeRequest(f *testing.F) {
	for _, fx := range requestPayloads(f) {
		f.Add(uint16(fx.MsgType), fx.Flags, fx.Payload)
	}
	f.Add(uint16(MsgGetRangeByDepth), uint16(0), []byte{})
	f.Add(uint16(MsgError), uint16(0), []byte{1})
	f.Fuzz(func(t *testing.T, typ, flags uint16, payload []byte) {
		req, err := DecodeRequest(MsgType(typ), flags, payload)
		if err != nil {
			if req != nil {
				t.Fatalf("non-nil request %#v with error %v", req, err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownMessage) {
				t.Fatalf("error %v is neither ErrMalformed nor ErrUnknownMessage", err)
			}
			return
		}
		if req.MsgType() != MsgType(typ) {
			t.Fatalf("decoded %s from msg_type %d", req.MsgType(), typ)
		}
		if a, ok := req.(AppendTurnRequest); ok {
			// What a server charges for is what the request declares.
			comp, n, ok := AppendTurnSize(payload)
			if !ok || comp != a.Compression || n != a.UncompressedLen {
				t.Fatalf("AppendTurnSize = %d, %d, %v; the request declares %d, %d", comp, n, ok, a.Compression, a.UncompressedLen)
			}
		}
		again, err := DecodeRequest(req.MsgType(), req.Flags(), req.AppendTo(nil))
		if err != nil || !reflect.DeepEqual(again, req) {
			t.Fatalf("re-decode mismatch:\n first %#v\nsecond %#v (%v)", req, again, err)
		}
	})
}

func FuzzDecodeTurnList(f *testing.F) {
	f.Add(AppendTurnList(nil, sampleTurns()))
	f.Add(AppendTurnList(nil, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	for _, fx := range requestPayloads(f) {
		f.Add(fx.Payload)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		turns, err := DecodeTurnList(payload)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if cap(turns) > len(payload)/minTurnRecordSize+1 {
			t.Fatalf("reserved %d records for %d bytes", cap(turns), len(payload))
		}
		again, err := DecodeTurnList(AppendTurnList(nil, turns))
		if err != nil || !reflect.DeepEqual(again, turns) {
			t.Fatalf("re-decode mismatch: %v", err)
		}
	})
}

func FuzzDecodeResponses(f *testing.F) {
	for _, tc := range responseCases() {
		f.Add(tc.encode())
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, tc := range responseCases() {
			if _, err := tc.decode(payload); err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: error %v is not ErrMalformed", tc.name, err)
			}
		}
	})
}
