package securitytest_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/fstree"
)

// rawConn speaks frames directly: the suite sends what a client must not
// get away with (messages before HELLO, messages after a refused one).
type rawConn struct {
	conn net.Conn
	r    *bufio.Reader
	next uint64 // the last request id used
}

func (h *hosted) dialRaw(t *testing.T) *rawConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", h.binAddr, ioTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawConn{conn: conn, r: bufio.NewReader(conn), next: 100}
}

// frame encodes a request frame with the next request id.
func (c *rawConn) frame(m message) ([]byte, uint64) {
	c.next++
	return cxdbcompat.AppendFrame(nil, m.typ, m.flags, c.next, m.payload), c.next
}

func (c *rawConn) write(t *testing.T, b []byte) {
	t.Helper()
	_ = c.conn.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.conn.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func (c *rawConn) read(t *testing.T, reqID uint64) cxdbcompat.Frame {
	t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(ioTimeout))
	f, err := cxdbcompat.ReadFrame(c.r, nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	if f.ReqID != reqID {
		t.Fatalf("answer to request %d, want %d", f.ReqID, reqID)
	}
	return f
}

// call sends m and returns its answer.
func (c *rawConn) call(t *testing.T, m message) cxdbcompat.Frame {
	t.Helper()
	b, id := c.frame(m)
	c.write(t, b)
	return c.read(t, id)
}

// expectClosed requires the server to close the connection without
// another frame.
func (c *rawConn) expectClosed(t *testing.T) {
	t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(ioTimeout))
	f, err := cxdbcompat.ReadFrame(c.r, nil)
	if err == nil {
		t.Fatalf("connection still open: got %s for request %d", f.Type, f.ReqID)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection not closed within %v", ioTimeout)
	}
}

// message is one request frame.
type message struct {
	typ     cxdbcompat.MsgType
	flags   uint16
	payload []byte
}

func req(r cxdbcompat.Request) message { return message{r.MsgType(), r.Flags(), r.AppendTo(nil)} }

// hello is a HELLO whose client tag is tag and whose metadata carries key
// (none when "").
func hello(tag, key string) message {
	r := cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientTag: tag}
	if key != "" {
		r.ClientMetaJSON, _ = json.Marshal(map[string]string{"api_key": key})
	}
	return req(r)
}

// errorOf checks that f is an ERROR frame of code and kind with a JSON
// detail {"code","message"}, and returns it.
func errorOf(t *testing.T, f cxdbcompat.Frame, code uint32, kind string) cxdbcompat.ErrorResponse {
	t.Helper()
	if f.Type != cxdbcompat.MsgError {
		t.Fatalf("got %s, want ERROR %d", f.Type, code)
	}
	e, err := cxdbcompat.DecodeErrorResponse(f.Payload)
	if err != nil {
		t.Fatalf("ERROR payload %x: %v", f.Payload, err)
	}
	var detail struct{ Code, Message string }
	if json.Unmarshal(f.Payload[8:], &detail) != nil || detail.Code != e.Kind || detail.Message != e.Message || e.Message == "" {
		t.Errorf("ERROR detail is not {\"code\",\"message\"}: %s", f.Payload[8:])
	}
	if e.Code != code || e.Kind != kind {
		t.Fatalf("ERROR %d %s (%s), want %d %s", e.Code, e.Kind, e.Message, code, kind)
	}
	return e
}

// msgVariant is one concrete request of a message type, built from a set
// of ids.
type msgVariant struct {
	name  string
	build func(p ids) message
}

// msgCase is how a message type is tried.
type msgCase struct {
	write bool // reader keys get 403
	// fails is the ERROR code every caller gets for a message cardbox does
	// not serve (422 UNKNOWN_MESSAGE); 0 when acme's writer is answered
	// with the message's own type.
	fails    uint32
	variants []msgVariant
}

// appendMsg is an APPEND_TURN of a small payload.
func appendMsg(contextID, parent uint64, root *cxdbcompat.Hash) message {
	payload := []byte("an appended turn")
	r := cxdbcompat.AppendTurnRequest{
		ContextID: contextID, ParentTurnID: parent, DeclaredTypeID: "com.example.Note", DeclaredTypeVersion: 1, Encoding: cxdbcompat.EncodingMsgpack,
		UncompressedLen: uint32(len(payload)), ContentHash: blake3.Sum256(payload), Payload: payload, IdempotencyKey: []byte{},
	}
	if root != nil {
		r.HasFSRoot, r.FSRootHash = true, *root
	}
	return req(r)
}

func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// positiveBlob is what acme's own PUT_BLOB stores.
var positiveBlob = []byte("acme's blob of the positive case")

// msgCases has a case for every message type the protocol names: a type
// added to cxdbcompat without one fails the suite.
var msgCases = map[cxdbcompat.MsgType]msgCase{
	// A HELLO without a key: on an authenticated session it is answered
	// and changes nothing (the identity stays).
	cxdbcompat.MsgHello: {variants: []msgVariant{{"", func(ids) message { return hello("again", "") }}}},
	cxdbcompat.MsgCtxCreate: {write: true, variants: []msgVariant{
		{"acme's base turn", func(p ids) message { return req(cxdbcompat.CtxCreateRequest{BaseTurnID: p.Turn}) }},
	}},
	cxdbcompat.MsgCtxFork: {write: true, variants: []msgVariant{
		{"acme's base turn", func(p ids) message { return req(cxdbcompat.CtxForkRequest{BaseTurnID: p.Turn}) }},
	}},
	cxdbcompat.MsgGetHead: {variants: []msgVariant{
		{"acme's context", func(p ids) message { return req(cxdbcompat.GetHeadRequest{ContextID: p.Context}) }},
		{"acme's fork", func(p ids) message { return req(cxdbcompat.GetHeadRequest{ContextID: p.Fork}) }},
	}},
	cxdbcompat.MsgAppendTurn: {write: true, variants: []msgVariant{
		{"acme's context", func(p ids) message { return appendMsg(p.Context, 0, nil) }},
		{"own context, acme's parent turn", func(p ids) message { return appendMsg(p.OwnContext, p.Turn, nil) }},
		{"own context, acme's fs root", func(p ids) message { return appendMsg(p.OwnContext, 0, &p.Tree) }},
	}},
	cxdbcompat.MsgGetLast: {variants: []msgVariant{
		{"acme's context", func(p ids) message {
			return req(cxdbcompat.GetLastRequest{ContextID: p.Context, Limit: 10, IncludePayload: true})
		}},
	}},
	cxdbcompat.MsgGetBefore: {variants: []msgVariant{
		{"acme's context", func(p ids) message {
			return req(cxdbcompat.GetBeforeRequest{ContextID: p.Context, BeforeTurnID: p.Turn, Limit: 10, IncludePayload: true})
		}},
		{"own context, acme's turn as cursor", func(p ids) message {
			return req(cxdbcompat.GetBeforeRequest{ContextID: p.OwnContext, BeforeTurnID: p.Turn, Limit: 10, IncludePayload: true})
		}},
	}},
	// Declared by CXDB without a layout: refused for everyone alike.
	cxdbcompat.MsgGetRangeByDepth: {fails: 422, variants: []msgVariant{
		{"acme's context", func(p ids) message {
			return message{cxdbcompat.MsgGetRangeByDepth, 0, append(u64(p.Context), 0, 0, 0, 0, 10, 0, 0, 0)}
		}},
	}},
	cxdbcompat.MsgGetBlob: {variants: []msgVariant{
		{"acme's blob", func(p ids) message { return req(cxdbcompat.GetBlobRequest{Hash: p.Blob}) }},
		{"acme's tree", func(p ids) message { return req(cxdbcompat.GetBlobRequest{Hash: p.Tree}) }},
		{"acme's turn payload", func(p ids) message { return req(cxdbcompat.GetBlobRequest{Hash: p.Payload}) }},
	}},
	cxdbcompat.MsgAttachFS: {write: true, variants: []msgVariant{
		{"acme's turn", func(p ids) message { return req(cxdbcompat.AttachFSRequest{TurnID: p.Turn, FSRootHash: p.OwnTree}) }},
		{"own turn, acme's tree", func(p ids) message { return req(cxdbcompat.AttachFSRequest{TurnID: p.OwnTurn, FSRootHash: p.Tree}) }},
	}},
	// PUT_BLOB names no ids; another tenant's put of acme's bytes is
	// tried by the blob dedup case.
	cxdbcompat.MsgPutBlob: {write: true, variants: []msgVariant{
		{"", func(ids) message {
			return req(cxdbcompat.PutBlobRequest{Hash: blake3.Sum256(positiveBlob), Data: positiveBlob})
		}},
	}},
	// Never a request: refused for everyone alike.
	cxdbcompat.MsgError: {fails: 422, variants: []msgVariant{{"", func(ids) message { return message{cxdbcompat.MsgError, 0, nil} }}}},
}

// messageTypes are the protocol's named message types, each with its
// case; a type without one fails t.
func messageTypes(t *testing.T) []cxdbcompat.MsgType {
	t.Helper()
	var out []cxdbcompat.MsgType
	for i := range 1 << 16 {
		typ := cxdbcompat.MsgType(i)
		if strings.HasPrefix(typ.String(), "MsgType(") {
			continue
		}
		if _, ok := msgCases[typ]; !ok {
			t.Errorf("message type %s has no security case: add it to msgCases", typ)
			continue
		}
		out = append(out, typ)
	}
	if len(out) != len(msgCases) || len(out) < 12 {
		t.Fatalf("message types %v, cases for %d", out, len(msgCases))
	}
	return out
}

// badHello is a HELLO that must be refused, and how.
type badHello struct {
	name string
	msg  message
	code uint32
	// sent is the secret it carries, which no answer may repeat.
	sent string
}

func (h *hosted) badHellos() []badHello {
	return []badHello{
		{"no key", hello("agent", ""), 401, ""},
		{"empty metadata", req(cxdbcompat.HelloRequest{ProtocolVersion: 1, ClientTag: "agent", ClientMetaJSON: []byte(`{}`)}), 401, ""},
		{"legacy HELLO", req(cxdbcompat.HelloRequest{Legacy: true}), 401, ""},
		{"malformed key", hello("agent", h.secrets[malformedKey]), 401, h.secrets[malformedKey]},
		{"forged key", hello("agent", h.secrets[forgedKey]), 401, h.secrets[forgedKey]},
		{"revoked key", hello("agent", h.secrets[revokedKey]), 401, h.secrets[revokedKey]},
		{"revoked key in the tag", hello("agent;key="+h.secrets[revokedKey], ""), 401, h.secrets[revokedKey]},
		{"expired key in the tag", hello(h.secrets[expiredKey], ""), 401, h.secrets[expiredKey]},
		{"analyst key", hello("agent", h.secrets[acmeAnalyst]), 403, h.secrets[acmeAnalyst]},
		{"analyst key in the tag", hello("agent;key="+h.secrets[acmeAnalyst], ""), 403, h.secrets[acmeAnalyst]},
		{"operator key", hello("agent", h.secrets[operator]), 403, h.secrets[operator]},
		{"operator key in the tag", hello("agent;key="+h.secrets[operator], ""), 403, h.secrets[operator]},
	}
}

// TestBinary tries every message type before HELLO, after a refused
// HELLO, as a reader, as another tenant with acme's ids and as acme's
// writer, checking each answer and that nothing changed.
func TestBinary(t *testing.T) {
	t.Parallel()
	h := newHosted(t)
	acme, asGlobex := h.seed(t)
	types := messageTypes(t)

	t.Run("before HELLO", func(t *testing.T) {
		for _, typ := range types {
			if typ == cxdbcompat.MsgHello {
				continue // tried as refused HELLOs
			}
			t.Run(typ.String(), func(t *testing.T) {
				for _, v := range msgCases[typ].variants {
					h.unchanged(t, "", func() {
						c := h.dialRaw(t)
						errorOf(t, c.call(t, v.build(acme)), 401, "UNAUTHORIZED")
						c.expectClosed(t)
					})
				}
			})
		}
	})

	t.Run("refused HELLO", func(t *testing.T) {
		for _, typ := range types {
			t.Run(typ.String(), func(t *testing.T) {
				badKeys := map[string][]string{} // refusal message -> HELLOs
				for _, bad := range h.badHellos() {
					h.unchanged(t, "", func() {
						// The message comes right behind the HELLO, as a
						// pipelining client sends it: it must never be
						// answered.
						c := h.dialRaw(t)
						helloFrame, id := c.frame(bad.msg)
						next, _ := c.frame(msgCases[typ].variants[0].build(acme))
						c.write(t, append(helloFrame, next...))
						kind := map[uint32]string{401: "UNAUTHORIZED", 403: "FORBIDDEN"}[bad.code]
						e := errorOf(t, c.read(t, id), bad.code, kind)
						if bad.sent != "" && strings.Contains(e.Message, bad.sent) {
							t.Errorf("%s: the answer holds the key sent: %s", bad.name, e.Message)
						}
						if bad.sent != "" && bad.code == 401 {
							badKeys[e.Message] = append(badKeys[e.Message], bad.name)
						}
						c.expectClosed(t)
					})
				}
				// A refusal does not say whether a key is unknown, forged,
				// revoked or expired.
				if len(badKeys) != 1 {
					t.Errorf("bad keys are told apart: %v", badKeys)
				}
			})
		}
	})

	t.Run("reader", func(t *testing.T) {
		c := h.dialRaw(t)
		if f := c.call(t, hello("acme-reader;key="+h.secrets[acmeReader], "")); f.Type != cxdbcompat.MsgHello {
			t.Fatalf("reader's HELLO: %s", f.Type)
		}
		for _, typ := range types {
			mc := msgCases[typ]
			t.Run(typ.String(), func(t *testing.T) {
				for _, v := range mc.variants {
					h.unchanged(t, "", func() {
						f := c.call(t, v.build(acme))
						switch {
						case mc.write:
							errorOf(t, f, 403, "FORBIDDEN")
						case mc.fails != 0:
							errorOf(t, f, mc.fails, "UNKNOWN_MESSAGE")
						case f.Type != typ:
							t.Errorf("%s: a reader's read answered %s %s", v.name, f.Type, detail(f))
						}
					})
				}
			})
		}
	})

	t.Run("other tenant", func(t *testing.T) {
		c := h.dialRaw(t)
		if f := c.call(t, hello("globex-agent", h.secrets[globexWriter])); f.Type != cxdbcompat.MsgHello {
			t.Fatalf("globex's HELLO: %s", f.Type)
		}
		missing := asGlobex.missing()
		renames := asGlobex.renames(missing)
		for _, typ := range types {
			if typ == cxdbcompat.MsgPutBlob {
				continue // no ids: see "blob dedup"
			}
			t.Run(typ.String(), func(t *testing.T) {
				for _, v := range msgCases[typ].variants {
					h.unchanged(t, "", func() {
						got := c.call(t, v.build(asGlobex))
						want := c.call(t, v.build(missing))
						if got.Type != want.Type || !bytes.Equal(answerText(got), rename(answerText(want), renames)) {
							t.Errorf("%s: acme's ids are told from ids that do not exist:\nacme's:  %s %s\nmissing: %s %s",
								v.name, got.Type, detail(got), want.Type, detail(want))
						}
						if typ != cxdbcompat.MsgHello && got.Type != cxdbcompat.MsgError {
							t.Errorf("%s: acme's ids answered %s", v.name, got.Type)
						}
						if e, err := cxdbcompat.DecodeErrorResponse(want.Payload); want.Type == cxdbcompat.MsgError && (err != nil || e.Code == 400) {
							t.Errorf("%s: the request is malformed, so it proves nothing: %s", v.name, detail(want))
						}
					})
				}
			})
		}
		// A later HELLO with acme's key does not make the session acme's.
		if f := c.call(t, hello("globex-agent", h.secrets[acmeWriter])); f.Type != cxdbcompat.MsgHello {
			t.Fatalf("second HELLO: %s %s", f.Type, detail(f))
		}
		errorOf(t, c.call(t, req(cxdbcompat.GetHeadRequest{ContextID: acme.Context})), 404, "NOT_FOUND")
	})

	// Before globex stores acme's bytes itself (blob dedup, next).
	t.Run("own tree naming acme's file", func(t *testing.T) { h.tryTreeNamingAcmesFile(t, asGlobex) })

	t.Run("blob dedup", func(t *testing.T) { h.tryBlobDedup(t, acme) })

	t.Run("acme's writer", func(t *testing.T) {
		c := h.dialRaw(t)
		if f := c.call(t, hello("acme-agent", h.secrets[acmeWriter])); f.Type != cxdbcompat.MsgHello {
			t.Fatalf("acme's HELLO: %s", f.Type)
		}
		for _, typ := range types {
			mc := msgCases[typ]
			t.Run(typ.String(), func(t *testing.T) {
				f := c.call(t, mc.variants[0].build(acme))
				if mc.fails != 0 {
					errorOf(t, f, mc.fails, "UNKNOWN_MESSAGE")
				} else if f.Type != typ {
					t.Errorf("answered %s %s", f.Type, detail(f))
				}
			})
		}
	})
}

// tryBlobDedup: another tenant cannot learn that acme stored some bytes.
// It cannot read them by hash, and storing the same bytes is new to it,
// once; then it reads its own copy, and acme's other blobs stay acme's.
func (h *hosted) tryBlobDedup(t *testing.T, acme ids) {
	t.Helper()
	c := h.dialRaw(t)
	if f := c.call(t, hello("globex-agent", h.secrets[globexWriter])); f.Type != cxdbcompat.MsgHello {
		t.Fatalf("globex's HELLO: %s", f.Type)
	}
	for _, data := range [][]byte{acmeBlobBytes, acmeFileBytes} {
		hash := blake3.Sum256(data)
		h.unchanged(t, "", func() {
			errorOf(t, c.call(t, req(cxdbcompat.GetBlobRequest{Hash: hash})), 404, "NOT_FOUND")
		})
		for i, wantNew := range []bool{true, false} {
			h.unchanged(t, "acme", func() {
				f := c.call(t, req(cxdbcompat.PutBlobRequest{Hash: hash, Data: data}))
				if f.Type != cxdbcompat.MsgPutBlob {
					t.Fatalf("PUT_BLOB: %s %s", f.Type, detail(f))
				}
				res, err := cxdbcompat.DecodePutBlobResponse(f.Payload)
				if err != nil || res.WasNew != wantNew {
					t.Errorf("put %d of acme's bytes: was_new %v (%v), want %v", i+1, res.WasNew, err, wantNew)
				}
			})
		}
		f := c.call(t, req(cxdbcompat.GetBlobRequest{Hash: hash}))
		if got, err := cxdbcompat.DecodeGetBlobResponse(f.Payload); f.Type != cxdbcompat.MsgGetBlob || err != nil || !bytes.Equal(got.Data, data) {
			t.Errorf("globex's own copy: %s %s", f.Type, detail(f))
		}
		// The HTTP API agrees.
		h.do(t, globexWriter, request{"GET", "/v1/blobs/" + idText(cxdbcompat.Hash(hash)), ""}).want(t, 200)
	}
	// Holding the file's bytes does not open acme's tree.
	errorOf(t, c.call(t, req(cxdbcompat.GetBlobRequest{Hash: acme.Tree})), 404, "NOT_FOUND")
	h.do(t, globexWriter, request{"GET", "/v1/blobs/" + idText(acme.Tree), ""}).wantError(t, 404, "NOT_FOUND")
}

// tryTreeNamingAcmesFile: a tree another tenant stores itself may name
// the hash of a file only acme stored; attaching it is refused exactly as
// for a file that nobody stored.
func (h *hosted) tryTreeNamingAcmesFile(t *testing.T, asGlobex ids) {
	t.Helper()
	c := h.dialRaw(t)
	if f := c.call(t, hello("globex-agent", h.secrets[globexWriter])); f.Type != cxdbcompat.MsgHello {
		t.Fatalf("globex's HELLO: %s", f.Type)
	}
	tree := func(file cxdbcompat.Hash) cxdbcompat.Hash {
		b := fstree.Encode([]fstree.Entry{{Name: "f.txt", Kind: fstree.KindFile, Mode: 0o644, Size: 1, Hash: file, HashOK: true}})
		hash := cxdbcompat.Hash(blake3.Sum256(b))
		if f := c.call(t, req(cxdbcompat.PutBlobRequest{Hash: hash, Data: b})); f.Type != cxdbcompat.MsgPutBlob {
			t.Fatalf("PUT_BLOB of a tree: %s %s", f.Type, detail(f))
		}
		return hash
	}
	acmeFile, noFile := cxdbcompat.Hash(blake3.Sum256(acmeFileBytes)), cxdbcompat.Hash(blake3.Sum256([]byte("nobody's file")))
	withAcmes, withNone := tree(acmeFile), tree(noFile)
	renames := [][2]string{{noFile.String(), acmeFile.String()}, {withNone.String(), withAcmes.String()}}
	for _, build := range []func(root cxdbcompat.Hash) message{
		func(root cxdbcompat.Hash) message { return appendMsg(asGlobex.OwnContext, 0, &root) },
		func(root cxdbcompat.Hash) message {
			return req(cxdbcompat.AttachFSRequest{TurnID: asGlobex.OwnTurn, FSRootHash: root})
		},
	} {
		h.unchanged(t, "", func() {
			got, want := c.call(t, build(withAcmes)), c.call(t, build(withNone))
			errorOf(t, want, 404, "NOT_FOUND")
			if got.Type != want.Type || !bytes.Equal(answerText(got), rename(answerText(want), renames)) {
				t.Errorf("a tree naming acme's file is told from one naming nobody's:\nacme's:  %s %s\nnobody's: %s %s",
					got.Type, detail(got), want.Type, detail(want))
			}
		})
	}
}

// answerText is what two answers are compared by: an ERROR's code and its
// JSON detail (whose length, in the frame, follows the ids' lengths), or
// a success's payload.
func answerText(f cxdbcompat.Frame) []byte {
	if f.Type == cxdbcompat.MsgError && len(f.Payload) >= 8 {
		return append(binary.LittleEndian.AppendUint32(nil, binary.LittleEndian.Uint32(f.Payload)), f.Payload[8:]...)
	}
	return f.Payload
}

func detail(f cxdbcompat.Frame) string {
	if f.Type == cxdbcompat.MsgError {
		if e, err := cxdbcompat.DecodeErrorResponse(f.Payload); err == nil {
			return e.Kind + ": " + e.Message
		}
	}
	return ""
}
