package server_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
)

// badInputEnv is a server with one context holding one turn, one stored
// blob, and a raw connection that said HELLO.
type badInputEnv struct {
	*env
	c      *rawConn
	ctxID  uint64
	turnID uint64
	blob   cxdbcompat.Hash
}

func newBadInputEnv(t *testing.T) *badInputEnv {
	t.Helper()
	e := newEnv(t)
	c := dialRaw(t, e.addr)
	c.expectOK(cxdbcompat.MsgHello, 0, cxdbcompat.HelloRequest{ProtocolVersion: 1}.AppendTo(nil))
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	r, _ := cxdbcompat.DecodeAppendTurnResponse(c.expectOK(cxdbcompat.MsgAppendTurn, 0, appendReq(h.ContextID, 0, []byte("\xa5first")).AppendTo(nil)))
	blob := fstree.Encode(nil) // an empty directory: a blob and a whole fs root
	c.expectOK(cxdbcompat.MsgPutBlob, 0, cxdbcompat.PutBlobRequest{Hash: hashOf(blob), Data: blob}.AppendTo(nil))
	return &badInputEnv{env: e, c: c, ctxID: h.ContextID, turnID: r.NewTurnID, blob: hashOf(blob)}
}

// requests returns one valid request of every type, on the env's objects.
func (b *badInputEnv) requests() []cxdbcompat.Request {
	withKey := appendReq(b.ctxID, 0, []byte("\xa6second"))
	withKey.IdempotencyKey = []byte("key-1")
	withFS := appendReq(b.ctxID, b.turnID, []byte("\xa5third"))
	withFS.HasFSRoot, withFS.FSRootHash = true, b.blob
	return []cxdbcompat.Request{
		cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientTag: "tag", ClientMetaJSON: []byte(`{"k":1}`)},
		cxdbcompat.CtxCreateRequest{BaseTurnID: b.turnID},
		cxdbcompat.CtxForkRequest{BaseTurnID: b.turnID},
		cxdbcompat.GetHeadRequest{ContextID: b.ctxID},
		withKey,
		withFS,
		cxdbcompat.GetLastRequest{ContextID: b.ctxID, Limit: 5, IncludePayload: true},
		cxdbcompat.GetBeforeRequest{ContextID: b.ctxID, BeforeTurnID: b.turnID, Limit: 5},
		cxdbcompat.GetBlobRequest{Hash: b.blob},
		cxdbcompat.AttachFSRequest{TurnID: b.turnID, FSRootHash: b.blob},
		cxdbcompat.PutBlobRequest{Hash: hashOf([]byte("new blob")), Data: []byte("new blob")},
	}
}

// TestTruncatedPayloads sends every strict prefix of a valid request of
// every type: each is a 400 that stores nothing, on a connection that stays
// open.
func TestTruncatedPayloads(t *testing.T) {
	t.Parallel()
	b := newBadInputEnv(t)
	before := b.snapshot()
	for _, req := range b.requests() {
		full := req.AppendTo(nil)
		t.Run(fmt.Sprintf("%s/%d_bytes", req.MsgType(), len(full)), func(t *testing.T) {
			for n := range len(full) {
				if n == 0 && req.MsgType() == cxdbcompat.MsgHello {
					continue // the empty HELLO is the legacy form
				}
				e := b.c.on(t).expectError(req.MsgType(), req.Flags(), full[:n], 400)
				if e.Kind != "BAD_REQUEST" {
					t.Fatalf("%d-byte prefix: kind %q", n, e.Kind)
				}
			}
		})
	}
	b.requireUnchanged(before, "truncated requests")
	// GET_BLOB needs exactly 32 bytes: a longer payload is malformed too.
	b.c.expectError(cxdbcompat.MsgGetBlob, 0, append(b.blob[:], 0), 400)
	// The connection still serves, and the untruncated requests succeed.
	for _, req := range b.requests() {
		b.c.expectOK(req.MsgType(), req.Flags(), req.AppendTo(nil))
	}
}

// TestRejectedRequestsStoreNothing covers every way a well-framed request
// can be refused, with its code and kind.
func TestRejectedRequestsStoreNothing(t *testing.T) {
	t.Parallel()
	b := newBadInputEnv(t)
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Close()
	payload := []byte("\xa7payload")
	missing := hashOf([]byte("missing"))
	tests := []struct {
		name string
		typ  cxdbcompat.MsgType
		// flags of the frame
		flags   uint16
		payload func() []byte
		code    uint32
		kind    string
	}{
		{"msg type 0", 0, 0, func() []byte { return u64(b.ctxID) }, 422, "UNKNOWN_MESSAGE"},
		{"msg type 8 GET_RANGE_BY_DEPTH", 8, 0, func() []byte { return make([]byte, 20) }, 422, "UNKNOWN_MESSAGE"},
		{"msg type 12", 12, 0, nil, 422, "UNKNOWN_MESSAGE"},
		{"msg type 255 ERROR", 255, 0, func() []byte { return cxdbcompat.ErrorResponse{Code: 1, Kind: "X", Message: "x"}.AppendTo(nil) }, 422, "UNKNOWN_MESSAGE"},
		{"msg type 65535", 65535, 0xffff, nil, 422, "UNKNOWN_MESSAGE"},
		{"content hash mismatch", cxdbcompat.MsgAppendTurn, 0, func() []byte {
			r := appendReq(b.ctxID, 0, payload)
			r.ContentHash[0] ^= 1
			return r.AppendTo(nil)
		}, 409, "CONFLICT"},
		{"uncompressed length mismatch", cxdbcompat.MsgAppendTurn, 0, func() []byte {
			r := appendReq(b.ctxID, 0, payload)
			r.UncompressedLen++
			return r.AppendTo(nil)
		}, 409, "CONFLICT"},
		{"zstd length mismatch", cxdbcompat.MsgAppendTurn, 0, func() []byte {
			r := appendReq(b.ctxID, 0, payload)
			r.Compression, r.Payload, r.UncompressedLen = cxdbcompat.CompressionZstd, zw.EncodeAll(payload, nil), uint32(len(payload)-1)
			return r.AppendTo(nil)
		}, 409, "CONFLICT"},
		{"zstd hash mismatch", cxdbcompat.MsgAppendTurn, 0, func() []byte {
			r := appendReq(b.ctxID, 0, payload)
			r.Compression, r.Payload = cxdbcompat.CompressionZstd, zw.EncodeAll([]byte("\xa7PAYLOAD"), nil)
			return r.AppendTo(nil)
		}, 409, "CONFLICT"},
		{"unsupported compression", cxdbcompat.MsgAppendTurn, 0, func() []byte {
			r := appendReq(b.ctxID, 0, payload)
			r.Compression = 2
			return r.AppendTo(nil)
		}, 422, "UNPROCESSABLE"},
		// Decoded no further than declared: a length mismatch.
		{"zstd frame inflating past its declared length", cxdbcompat.MsgAppendTurn, 0, func() []byte {
			r := appendReq(b.ctxID, 0, payload)
			r.Compression, r.Payload = cxdbcompat.CompressionZstd, zw.EncodeAll(make([]byte, 65<<20), nil)
			return r.AppendTo(nil)
		}, 409, "CONFLICT"},
		{"unknown encoding", cxdbcompat.MsgAppendTurn, 0, func() []byte {
			r := appendReq(b.ctxID, 0, payload)
			r.Encoding = 7
			return r.AppendTo(nil)
		}, 400, "BAD_REQUEST"},
		{"undecodable zstd", cxdbcompat.MsgAppendTurn, 0, func() []byte {
			r := appendReq(b.ctxID, 0, payload)
			r.Compression = cxdbcompat.CompressionZstd
			return r.AppendTo(nil)
		}, 422, "UNPROCESSABLE"},
		{"zstd declaring over 64 MiB", cxdbcompat.MsgAppendTurn, 0, func() []byte {
			r := appendReq(b.ctxID, 0, payload)
			r.Compression, r.Payload, r.UncompressedLen = cxdbcompat.CompressionZstd, zw.EncodeAll(payload, nil), cxdbcompat.MaxPayload+1
			return r.AppendTo(nil)
		}, 422, "UNPROCESSABLE"},
		{"append to unknown context", cxdbcompat.MsgAppendTurn, 0, func() []byte { return appendReq(b.ctxID+100, 0, payload).AppendTo(nil) }, 404, "NOT_FOUND"},
		{"append with unknown parent", cxdbcompat.MsgAppendTurn, 0, func() []byte { return appendReq(b.ctxID, b.turnID+100, payload).AppendTo(nil) }, 404, "NOT_FOUND"},
		{"append with missing fs root", cxdbcompat.MsgAppendTurn, cxdbcompat.FlagFSRoot, func() []byte {
			r := appendReq(b.ctxID, 0, payload)
			r.HasFSRoot, r.FSRootHash = true, missing
			return r.AppendTo(nil)
		}, 404, "NOT_FOUND"},
		{"put blob hash mismatch", cxdbcompat.MsgPutBlob, 0, func() []byte {
			return cxdbcompat.PutBlobRequest{Hash: missing, Data: []byte("other bytes")}.AppendTo(nil)
		}, 409, "CONFLICT"},
		{"fork from unknown turn", cxdbcompat.MsgCtxFork, 0, func() []byte { return u64(b.turnID + 100) }, 404, "NOT_FOUND"},
		{"create from unknown turn", cxdbcompat.MsgCtxCreate, 0, func() []byte { return u64(b.turnID + 100) }, 404, "NOT_FOUND"},
		{"get head of unknown context", cxdbcompat.MsgGetHead, 0, func() []byte { return u64(b.ctxID + 100) }, 404, "NOT_FOUND"},
		{"get last of unknown context", cxdbcompat.MsgGetLast, 0, func() []byte {
			return cxdbcompat.GetLastRequest{ContextID: b.ctxID + 100, Limit: 1}.AppendTo(nil)
		}, 404, "NOT_FOUND"},
		{"get before an unknown turn", cxdbcompat.MsgGetBefore, 0, func() []byte {
			return cxdbcompat.GetBeforeRequest{ContextID: b.ctxID, BeforeTurnID: b.turnID + 100, Limit: 1}.AppendTo(nil)
		}, 404, "NOT_FOUND"},
		{"get missing blob", cxdbcompat.MsgGetBlob, 0, func() []byte { return missing[:] }, 404, "NOT_FOUND"},
		{"attach fs to unknown turn", cxdbcompat.MsgAttachFS, 0, func() []byte {
			return cxdbcompat.AttachFSRequest{TurnID: b.turnID + 100, FSRootHash: b.blob}.AppendTo(nil)
		}, 404, "NOT_FOUND"},
		{"attach missing fs root", cxdbcompat.MsgAttachFS, 0, func() []byte {
			return cxdbcompat.AttachFSRequest{TurnID: b.turnID, FSRootHash: missing}.AppendTo(nil)
		}, 404, "NOT_FOUND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p []byte
			if tt.payload != nil {
				p = tt.payload()
			}
			env, c := b.env.on(t), b.c.on(t)
			before := env.snapshot()
			e := c.expectError(tt.typ, tt.flags, p, tt.code)
			if e.Kind != tt.kind {
				t.Errorf("kind %q (%s), want %q", e.Kind, e.Message, tt.kind)
			}
			env.requireUnchanged(before, tt.name)
			// The connection stays open.
			c.expectOK(cxdbcompat.MsgGetHead, 0, u64(b.ctxID))
		})
	}
}

// TestOversizeFrame: a header announcing more than 64 MiB is answered with
// 413 before its payload is read, then the connection closes; other
// connections and the server carry on.
func TestOversizeFrame(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bystander := dialRaw(t, e.addr)
	bystander.expectOK(cxdbcompat.MsgHello, 0, nil)

	tests := []struct {
		name string
		len  uint32
		// trailing bytes the client goes on sending after the header, as
		// a streaming writer would
		trailing int
	}{
		{"64 MiB + 1", cxdbcompat.MaxPayload + 1, 0},
		{"4 GiB - 1", 0xffffffff, 0},
		{"with payload bytes following", cxdbcompat.MaxPayload + 1, 8 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, bystander := e.on(t), bystander.on(t)
			before := e.snapshot()
			c := dialRaw(t, e.addr)
			c.expectOK(cxdbcompat.MsgHello, 0, nil)
			hdr := make([]byte, cxdbcompat.HeaderSize)
			binary.LittleEndian.PutUint32(hdr[0:], tt.len)
			binary.LittleEndian.PutUint16(hdr[4:], uint16(cxdbcompat.MsgPutBlob))
			binary.LittleEndian.PutUint64(hdr[8:], 4242)
			c.write(hdr)
			if tt.trailing > 0 {
				// The server stops reading, so this write may fail; the
				// 413 must arrive regardless.
				go func() {
					_ = c.conn.SetWriteDeadline(time.Now().Add(ioTimeout))
					_, _ = c.conn.Write(make([]byte, tt.trailing))
				}()
			}
			f, err := c.read()
			if err != nil {
				t.Fatalf("no 413 before the connection ended: %v", err)
			}
			if f.ReqID != 4242 {
				t.Fatalf("413 for req_id %d, want 4242", f.ReqID)
			}
			if er := requireError(t, f, 413); er.Kind != "FRAME_TOO_LARGE" {
				t.Fatalf("kind %q", er.Kind)
			}
			c.expectClosed()
			e.requireUnchanged(before, "oversize frame")
			bystander.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0))
			e.requireServing()
		})
	}
}

// TestCutFrames: a stream that ends inside a header or a payload closes
// that connection without an answer; nothing is stored.
func TestCutFrames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	good := cxdbcompat.AppendFrame(nil, cxdbcompat.MsgPutBlob, 0, 9, cxdbcompat.PutBlobRequest{Hash: hashOf([]byte("x")), Data: []byte("x")}.AppendTo(nil))
	for _, cut := range []int{1, 7, cxdbcompat.HeaderSize - 1, cxdbcompat.HeaderSize, cxdbcompat.HeaderSize + 1, len(good) - 1} {
		for _, how := range []string{"half-close", "close"} {
			t.Run(fmt.Sprintf("%d_of_%d_bytes/%s", cut, len(good), how), func(t *testing.T) {
				e := e.on(t)
				before := e.snapshot()
				c := dialRaw(t, e.addr)
				c.write(good[:cut])
				if how == "close" {
					c.close()
				} else {
					if err := c.conn.(*net.TCPConn).CloseWrite(); err != nil {
						t.Fatal(err)
					}
					_ = c.conn.SetReadDeadline(time.Now().Add(ioTimeout))
					if rest, err := io.ReadAll(c.conn); err != nil || len(rest) != 0 {
						t.Fatalf("after a cut frame the server sent %x (%v), want a clean close", rest, err)
					}
				}
				e.requireUnchanged(before, "cut frame")
				e.requireServing()
			})
		}
	}
	// A complete frame before the cut is still answered.
	c := dialRaw(t, e.addr)
	c.write(append(bytes.Clone(good), good[:5]...))
	if f := c.mustRead(); f.Type != cxdbcompat.MsgPutBlob || f.ReqID != 9 {
		t.Fatalf("complete frame before the cut: %s %s", f.Type, describe(f))
	}
}

// TestUnavailableIs503: with Postgres gone, requests that need it are 503
// and the connection stays open; once the store is closed, appends are 503.
func TestUnavailableIs503(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envConfig{allowErrorLogs: true}) // 503s are logged
	c := dialRaw(t, e.addr)
	h, _ := cxdbcompat.DecodeHeadResponse(c.expectOK(cxdbcompat.MsgCtxCreate, 0, u64(0)))
	r, _ := cxdbcompat.DecodeAppendTurnResponse(c.expectOK(cxdbcompat.MsgAppendTurn, 0, appendReq(h.ContextID, 0, []byte("x")).AppendTo(nil)))

	tree := fstree.Encode(nil)
	root, _ := cxdbcompat.DecodePutBlobResponse(c.expectOK(cxdbcompat.MsgPutBlob, 0, cxdbcompat.PutBlobRequest{Hash: hashOf(tree), Data: tree}.AppendTo(nil)))

	e.pool.Close()
	if er := c.expectError(cxdbcompat.MsgCtxCreate, 0, u64(0), 503); er.Kind != "UNAVAILABLE" {
		t.Fatalf("CTX_CREATE without Postgres: kind %q", er.Kind)
	}
	c.expectError(cxdbcompat.MsgAttachFS, 0, cxdbcompat.AttachFSRequest{TurnID: r.NewTurnID, FSRootHash: root.Hash}.AppendTo(nil), 503)
	// What is served from memory still is.
	c.expectOK(cxdbcompat.MsgGetHead, 0, u64(h.ContextID))

	if err := e.engine.Close(); err != nil {
		t.Fatal(err)
	}
	if er := c.expectError(cxdbcompat.MsgAppendTurn, 0, appendReq(h.ContextID, 0, []byte("y")).AppendTo(nil), 503); er.Kind != "UNAVAILABLE" {
		t.Fatalf("APPEND on a closed store: kind %q", er.Kind)
	}
}
