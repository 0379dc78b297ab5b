package cxdbcompat

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"testing"
)

func TestMsgTypeString(t *testing.T) {
	tests := []struct {
		t    MsgType
		want string
	}{
		{MsgHello, "HELLO"},
		{MsgCtxCreate, "CTX_CREATE"},
		{MsgCtxFork, "CTX_FORK"},
		{MsgGetHead, "GET_HEAD"},
		{MsgAppendTurn, "APPEND_TURN"},
		{MsgGetLast, "GET_LAST"},
		{MsgGetBefore, "GET_BEFORE"},
		{MsgGetRangeByDepth, "GET_RANGE_BY_DEPTH"},
		{MsgGetBlob, "GET_BLOB"},
		{MsgAttachFS, "ATTACH_FS"},
		{MsgPutBlob, "PUT_BLOB"},
		{MsgError, "ERROR"},
		{0, "MsgType(0)"},
		{12, "MsgType(12)"},
		{65535, "MsgType(65535)"},
	}
	for _, tc := range tests {
		if got := tc.t.String(); got != tc.want {
			t.Errorf("MsgType(%d).String() = %q, want %q", uint16(tc.t), got, tc.want)
		}
	}
}

func TestAppendFrameLayout(t *testing.T) {
	got := AppendFrame([]byte{0xEE}, MsgAppendTurn, FlagFSRoot, 0x0102030405060708, []byte("abc"))
	want, _ := hex.DecodeString("ee" + "03000000" + "0500" + "0100" + "0807060504030201" + "616263")
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendFrame = %x, want %x", got, want)
	}
}

func TestReadFrameRoundTrip(t *testing.T) {
	sizes := []int{0, 1, 16, readChunk - 1, readChunk, readChunk + 1, 5*readChunk + 3}
	for _, n := range sizes {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		wire := AppendFrame(nil, MsgPutBlob, 3, uint64(n)+1, payload)
		for _, bufCap := range []int{0, n, n + 10} {
			buf := make([]byte, 0, bufCap)
			f, err := ReadFrame(bytes.NewReader(wire), buf)
			if err != nil {
				t.Fatalf("size %d cap %d: %v", n, bufCap, err)
			}
			if f.Type != MsgPutBlob || f.Flags != 3 || f.ReqID != uint64(n)+1 || !bytes.Equal(f.Payload, payload) {
				t.Fatalf("size %d cap %d: frame mismatch: %v/%d/%d len %d", n, bufCap, f.Type, f.Flags, f.ReqID, len(f.Payload))
			}
			if n > 0 && bufCap >= n && &f.Payload[0] != &buf[:1][0] {
				t.Errorf("size %d cap %d: payload does not reuse buf", n, bufCap)
			}
		}
	}
}

func TestReadFrameSequence(t *testing.T) {
	var wire []byte
	for i := range 5 {
		wire = AppendFrame(wire, MsgGetHead, 0, uint64(i), appendU64(nil, uint64(i*10)))
	}
	r := bytes.NewReader(wire)
	var buf []byte
	for i := range 5 {
		f, err := ReadFrame(r, buf)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		req, err := DecodeGetHeadRequest(f.Payload)
		if err != nil || f.ReqID != uint64(i) || req.ContextID != uint64(i*10) {
			t.Fatalf("frame %d: req_id %d ctx %d err %v", i, f.ReqID, req.ContextID, err)
		}
		buf = f.Payload
	}
	if _, err := ReadFrame(r, buf); err != io.EOF {
		t.Fatalf("after last frame: err = %v, want io.EOF", err)
	}
}

func header(n uint32, typ MsgType, reqID uint64) []byte {
	return appendHeader(nil, n, typ, 0, reqID)
}

func TestReadFrameErrors(t *testing.T) {
	tests := []struct {
		name string
		wire []byte
		want error
	}{
		{"empty stream", nil, io.EOF},
		{"partial header", header(4, MsgGetHead, 1)[:7], io.ErrUnexpectedEOF},
		{"missing payload", header(8, MsgGetHead, 1), io.ErrUnexpectedEOF},
		{"partial payload", append(header(8, MsgGetHead, 1), 1, 2, 3), io.ErrUnexpectedEOF},
		{"huge announced, little sent", append(header(MaxPayload, MsgPutBlob, 1), 1, 2, 3), io.ErrUnexpectedEOF},
		{"too large", header(MaxPayload+1, MsgPutBlob, 9), ErrFrameTooLarge},
		{"max u32", header(^uint32(0), MsgPutBlob, 9), ErrFrameTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(tc.wire), nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.want == io.EOF && err != io.EOF {
				t.Fatalf("clean EOF must be io.EOF itself, got %v", err)
			}
		})
	}
}

func TestReadFrameTooLargeDetails(t *testing.T) {
	wire := append(header(MaxPayload+1, MsgAppendTurn, 77), "trailing"...)
	r := bytes.NewReader(wire)
	_, err := ReadFrame(r, nil)
	var tooLarge *FrameTooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("err = %v, want *FrameTooLargeError", err)
	}
	if tooLarge.Len != MaxPayload+1 || tooLarge.Type != MsgAppendTurn || tooLarge.ReqID != 77 {
		t.Errorf("error fields = %+v", tooLarge)
	}
	if r.Len() != len("trailing") {
		t.Errorf("ReadFrame consumed %d payload bytes of an oversize frame", len("trailing")-r.Len())
	}
}

// TestReadFrameAllocation checks that memory use follows the bytes received,
// not the announced length.
func TestReadFrameAllocation(t *testing.T) {
	tests := []struct {
		name string
		wire []byte
	}{
		{"oversize header", header(^uint32(0), MsgPutBlob, 1)},
		{"max announced, 100 bytes sent", append(header(MaxPayload, MsgPutBlob, 1), make([]byte, 100)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			allocated := bytesAllocated(func() {
				if _, err := ReadFrame(bytes.NewReader(tc.wire), nil); err == nil {
					t.Fatal("ReadFrame succeeded")
				}
			})
			if allocated > 4*readChunk {
				t.Errorf("allocated %d bytes", allocated)
			}
		})
	}
}

func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestReadFrameMaxPayloadAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 128 MiB")
	}
	payload := make([]byte, MaxPayload)
	payload[MaxPayload-1] = 0x5A
	f, err := ReadFrame(bytes.NewReader(AppendFrame(nil, MsgPutBlob, 0, 1, payload)), nil)
	if err != nil {
		t.Fatalf("ReadFrame: %v", err)
	}
	if len(f.Payload) != MaxPayload || f.Payload[MaxPayload-1] != 0x5A {
		t.Fatalf("payload len %d", len(f.Payload))
	}
}

func TestStartFinishFrame(t *testing.T) {
	payload := HeadResponse{ContextID: 1, HeadTurnID: 2, HeadDepth: 3}.AppendTo(nil)
	buf, start := StartFrame([]byte("prefix"), MsgGetHead, 0, 42)
	buf = HeadResponse{ContextID: 1, HeadTurnID: 2, HeadDepth: 3}.AppendTo(buf)
	buf, err := FinishFrame(buf, start)
	if err != nil {
		t.Fatal(err)
	}
	want := AppendFrame([]byte("prefix"), MsgGetHead, 0, 42, payload)
	if !bytes.Equal(buf, want) {
		t.Fatalf("got %x\nwant %x", buf, want)
	}
}

func TestFinishFrameErrors(t *testing.T) {
	if _, err := FinishFrame(make([]byte, 10), 0); err == nil {
		t.Error("FinishFrame accepted a buffer shorter than a header")
	}
	if _, err := FinishFrame(make([]byte, 40), -1); err == nil {
		t.Error("FinishFrame accepted a negative offset")
	}
	buf, start := StartFrame(nil, MsgGetBlob, 0, 5)
	buf = append(buf, make([]byte, MaxPayload+1)...)
	_, err := FinishFrame(buf, start)
	var tooLarge *FrameTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.ReqID != 5 || tooLarge.Type != MsgGetBlob {
		t.Fatalf("err = %v, want *FrameTooLargeError for GET_BLOB req 5", err)
	}
}

func TestWriteFrame(t *testing.T) {
	var out bytes.Buffer
	if err := WriteFrame(&out, MsgPutBlob, 0, 7, []byte("data")); err != nil {
		t.Fatal(err)
	}
	if want := AppendFrame(nil, MsgPutBlob, 0, 7, []byte("data")); !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("got %x, want %x", out.Bytes(), want)
	}
	err := WriteFrame(io.Discard, MsgPutBlob, 0, 7, make([]byte, MaxPayload+1))
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize WriteFrame err = %v", err)
	}
}
