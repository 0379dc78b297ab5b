package server_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// decodeLikeOfficialClient reads a GET_LAST / GET_BEFORE answer the way
// the official CXDB Go client does: through a bytes.Reader, with
// binary.Read for numbers and Reader.Read for the type id, hash and
// payload. Reader.Read answers io.EOF for any read, even an empty one, at
// the end of the buffer; the client treats that as a failure.
func decodeLikeOfficialClient(data []byte) (n int, err error) {
	r := bytes.NewReader(data)
	var count uint32
	if err := binary.Read(r, binary.LittleEndian, &count); err != nil {
		return 0, err
	}
	for i := uint32(0); i < count; i++ {
		var turnID, parentID uint64
		var depth, typeLen, version, encoding, compression, rawLen, payloadLen uint32
		var hash [32]byte
		for _, v := range []any{&turnID, &parentID, &depth, &typeLen} {
			if err := binary.Read(r, binary.LittleEndian, v); err != nil {
				return n, err
			}
		}
		if _, err := r.Read(make([]byte, typeLen)); err != nil {
			return n, fmt.Errorf("type id: %w", err)
		}
		for _, v := range []any{&version, &encoding, &compression, &rawLen} {
			if err := binary.Read(r, binary.LittleEndian, v); err != nil {
				return n, err
			}
		}
		if _, err := r.Read(hash[:]); err != nil {
			return n, err
		}
		if err := binary.Read(r, binary.LittleEndian, &payloadLen); err != nil {
			return n, err
		}
		if _, err := r.Read(make([]byte, payloadLen)); err != nil {
			return n, fmt.Errorf("payload of record %d: %w", i, err)
		}
		n++
	}
	return n, nil
}

// Every GET_LAST and GET_BEFORE answer must be readable by the official
// client, in particular those whose last record has an empty payload.
func TestTurnListsReadableByTheOfficialClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	c.expectOK(cxdbcompat.MsgAppendTurn, 0, appendReq(h.ContextID, 0, []byte("full")).AppendTo(nil))
	last, _ := cxdbcompat.DecodeAppendTurnResponse(c.expectOK(cxdbcompat.MsgAppendTurn, 0, appendReq(h.ContextID, 0, nil).AppendTo(nil)))
	tests := []struct {
		name    string
		typ     cxdbcompat.MsgType
		payload []byte
		want    int
	}{
		{"GET_LAST with payloads, empty last payload", cxdbcompat.MsgGetLast, cxdbcompat.GetLastRequest{ContextID: h.ContextID, Limit: 10, IncludePayload: true}.AppendTo(nil), 2},
		{"GET_LAST without payloads", cxdbcompat.MsgGetLast, cxdbcompat.GetLastRequest{ContextID: h.ContextID, Limit: 10}.AppendTo(nil), 2},
		{"GET_BEFORE with a payload", cxdbcompat.MsgGetBefore, cxdbcompat.GetBeforeRequest{ContextID: h.ContextID, BeforeTurnID: last.NewTurnID, Limit: 10, IncludePayload: true}.AppendTo(nil), 1},
		{"GET_BEFORE without payloads", cxdbcompat.MsgGetBefore, cxdbcompat.GetBeforeRequest{ContextID: h.ContextID, BeforeTurnID: last.NewTurnID, Limit: 10}.AppendTo(nil), 1},
		{"empty list", cxdbcompat.MsgGetBefore, cxdbcompat.GetBeforeRequest{ContextID: h.ContextID, BeforeTurnID: last.NewTurnID - 1, Limit: 10}.AppendTo(nil), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := c.expectOK(tt.typ, 0, tt.payload)
			n, err := decodeLikeOfficialClient(resp)
			if err != nil || n != tt.want {
				t.Fatalf("official client's decoding: %d records, %v; want %d", n, err, tt.want)
			}
			if turns, err := cxdbcompat.DecodeTurnList(resp); err != nil || len(turns) != tt.want {
				t.Fatalf("cardbox's decoding: %d records, %v", len(turns), err)
			}
		})
	}
}
