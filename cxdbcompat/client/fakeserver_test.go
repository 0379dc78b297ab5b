package client

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// replier writes response frames on one fake-server connection.
type replier struct {
	mu   sync.Mutex
	conn net.Conn
}

func (r *replier) reply(reqID uint64, typ cxdbcompat.MsgType, payload []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = cxdbcompat.WriteFrame(r.conn, typ, 0, reqID, payload)
}

func (r *replier) replyError(reqID uint64, code uint32, kind, msg string) {
	r.reply(reqID, cxdbcompat.MsgError, cxdbcompat.ErrorResponse{Code: code, Kind: kind, Message: msg}.AppendTo(nil))
}

// frameHandler handles one request frame; it may reply at once, later, or
// never. Returning false closes the connection.
type frameHandler func(r *replier, f cxdbcompat.Frame) bool

// fakeServer is a minimal TCP server built from the codec. It records every
// request frame it reads.
type fakeServer struct {
	ln     net.Listener
	handle frameHandler
	wg     sync.WaitGroup

	mu     sync.Mutex
	frames []cxdbcompat.Frame
	conns  []net.Conn
}

func startFakeServer(t *testing.T, handle frameHandler) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveFake(t, ln, handle)
}

// startFakeTLSServer serves over TLS and returns a client config that
// trusts the server's certificate.
func startFakeTLSServer(t *testing.T, handle frameHandler) (*fakeServer, *tls.Config) {
	t.Helper()
	certs := httptest.NewUnstartedServer(nil)
	certs.StartTLS() // only for its self-signed certificate
	t.Cleanup(certs.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveFake(t, tls.NewListener(ln, certs.TLS.Clone()), handle)
	return srv, certs.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
}

func serveFake(t *testing.T, ln net.Listener, handle frameHandler) *fakeServer {
	t.Helper()
	s := &fakeServer{ln: ln, handle: handle}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *fakeServer) addr() string { return s.ln.Addr().String() }

func (s *fakeServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, conn)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(conn)
	}
}

func (s *fakeServer) serve(conn net.Conn) {
	defer s.wg.Done()
	defer conn.Close()
	r := &replier{conn: conn}
	for {
		f, err := cxdbcompat.ReadFrame(conn, nil)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.frames = append(s.frames, f)
		s.mu.Unlock()
		if !s.handle(r, f) {
			return
		}
	}
}

// requests returns the recorded frames, HELLO excluded.
func (s *fakeServer) requests() []cxdbcompat.Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []cxdbcompat.Frame
	for _, f := range s.frames {
		if f.Type != cxdbcompat.MsgHello {
			out = append(out, f)
		}
	}
	return out
}

func (s *fakeServer) allFrames() []cxdbcompat.Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cxdbcompat.Frame(nil), s.frames...)
}

func (s *fakeServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// helloFirst answers HELLO and delegates everything else to next.
func helloFirst(next frameHandler) frameHandler {
	return func(r *replier, f cxdbcompat.Frame) bool {
		if f.Type == cxdbcompat.MsgHello {
			r.reply(f.ReqID, f.Type, cxdbcompat.HelloResponse{SessionID: 7, ProtocolVersion: 1}.AppendTo(nil))
			return true
		}
		return next(r, f)
	}
}

// memStore is an in-memory CXDB with cardbox semantics (first turn depth 1,
// JSON error details), enough to exercise every client method.
type memStore struct {
	mu      sync.Mutex
	nextCtx uint64
	heads   map[uint64]cxdbcompat.HeadResponse
	turns   map[uint64]cxdbcompat.TurnRecord // payload stored uncompressed
	blobs   map[cxdbcompat.Hash][]byte
	fsRoots map[uint64]cxdbcompat.Hash
	zstd    *zstd.Decoder
}

func newMemStore(t *testing.T) *memStore {
	t.Helper()
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dec.Close)
	return &memStore{
		heads:   map[uint64]cxdbcompat.HeadResponse{},
		turns:   map[uint64]cxdbcompat.TurnRecord{},
		blobs:   map[cxdbcompat.Hash][]byte{},
		fsRoots: map[uint64]cxdbcompat.Hash{},
		zstd:    dec,
	}
}

// storeError is a request failure answered with an ERROR frame.
type storeError struct {
	code uint32
	kind string
	msg  string
}

func (e *storeError) Error() string { return e.msg }

func notFound(what string) error { return &storeError{404, "NOT_FOUND", what + " not found"} }
func invalid(msg string) error   { return &storeError{422, "INVALID", msg} }

func (m *memStore) handle(r *replier, f cxdbcompat.Frame) bool {
	m.mu.Lock()
	resp, err := m.dispatch(f)
	m.mu.Unlock()
	var se *storeError
	switch {
	case errors.As(err, &se):
		r.replyError(f.ReqID, se.code, se.kind, se.msg)
	case err != nil:
		r.replyError(f.ReqID, 422, "MALFORMED", err.Error())
	default:
		r.reply(f.ReqID, f.Type, resp)
	}
	return true
}

func (m *memStore) dispatch(f cxdbcompat.Frame) ([]byte, error) {
	req, err := cxdbcompat.DecodeRequest(f.Type, f.Flags, f.Payload)
	if err != nil {
		return nil, err
	}
	switch req := req.(type) {
	case cxdbcompat.HelloRequest:
		return cxdbcompat.HelloResponse{SessionID: 1, ProtocolVersion: 1}.AppendTo(nil), nil
	case cxdbcompat.CtxCreateRequest:
		return m.newContext(req.BaseTurnID)
	case cxdbcompat.CtxForkRequest:
		return m.newContext(req.BaseTurnID)
	case cxdbcompat.GetHeadRequest:
		h, ok := m.heads[req.ContextID]
		if !ok {
			return nil, notFound("context")
		}
		return h.AppendTo(nil), nil
	case cxdbcompat.AppendTurnRequest:
		return m.appendTurn(req)
	case cxdbcompat.GetLastRequest:
		return m.getLast(req.ContextID, req.Limit, req.IncludePayload)
	case cxdbcompat.GetBeforeRequest:
		return m.getBefore(req)
	case cxdbcompat.GetBlobRequest:
		b, ok := m.blobs[req.Hash]
		if !ok {
			return nil, notFound("blob")
		}
		return cxdbcompat.GetBlobResponse{Data: b}.AppendTo(nil), nil
	case cxdbcompat.PutBlobRequest:
		return m.putBlob(req)
	case cxdbcompat.AttachFSRequest:
		return m.attachFS(req)
	}
	return nil, invalid("unhandled request")
}

func (m *memStore) newContext(base uint64) ([]byte, error) {
	var depth uint32
	if base != 0 {
		t, ok := m.turns[base]
		if !ok {
			return nil, notFound("base turn")
		}
		depth = t.Depth
	}
	m.nextCtx++
	h := cxdbcompat.HeadResponse{ContextID: m.nextCtx, HeadTurnID: base, HeadDepth: depth}
	m.heads[h.ContextID] = h
	return h.AppendTo(nil), nil
}

func (m *memStore) appendTurn(req cxdbcompat.AppendTurnRequest) ([]byte, error) {
	data, err := m.decompress(req)
	if err != nil {
		return nil, err
	}
	head, ok := m.heads[req.ContextID]
	if !ok {
		return nil, notFound("context")
	}
	parent := req.ParentTurnID
	if parent == 0 {
		parent = head.HeadTurnID
	}
	var depth uint32 = 1
	if parent != 0 {
		p, ok := m.turns[parent]
		if !ok {
			return nil, notFound("parent turn")
		}
		depth = p.Depth + 1
	}
	if _, ok := m.blobs[req.FSRootHash]; req.HasFSRoot && !ok {
		return nil, notFound("fs root tree blob")
	}
	id := uint64(len(m.turns) + 1)
	m.turns[id] = cxdbcompat.TurnRecord{
		TurnID: id, ParentTurnID: parent, Depth: depth, DeclaredTypeID: req.DeclaredTypeID,
		DeclaredTypeVersion: req.DeclaredTypeVersion, Encoding: req.Encoding,
		Compression: req.Compression, UncompressedLen: req.UncompressedLen,
		ContentHash: req.ContentHash, Payload: data,
	}
	if req.HasFSRoot {
		m.fsRoots[id] = req.FSRootHash
	}
	m.heads[req.ContextID] = cxdbcompat.HeadResponse{ContextID: req.ContextID, HeadTurnID: id, HeadDepth: depth}
	return cxdbcompat.AppendTurnResponse{ContextID: req.ContextID, NewTurnID: id, NewDepth: depth, ContentHash: req.ContentHash}.AppendTo(nil), nil
}

func (m *memStore) decompress(req cxdbcompat.AppendTurnRequest) ([]byte, error) {
	data := bytes.Clone(req.Payload)
	switch req.Compression {
	case cxdbcompat.CompressionNone:
	case cxdbcompat.CompressionZstd:
		var err error
		if data, err = m.zstd.DecodeAll(req.Payload, nil); err != nil {
			return nil, invalid("zstd decode failed")
		}
	default:
		return nil, invalid("unsupported compression")
	}
	if len(data) != int(req.UncompressedLen) {
		return nil, invalid("uncompressed length mismatch")
	}
	if blake3.Sum256(data) != req.ContentHash {
		return nil, invalid("content hash mismatch")
	}
	return data, nil
}

// chain returns up to limit turns ending at turn id, oldest first.
func (m *memStore) chain(id uint64, limit uint32, includePayload bool) []cxdbcompat.TurnRecord {
	var out []cxdbcompat.TurnRecord
	for ; id != 0 && uint32(len(out)) < limit; id = m.turns[id].ParentTurnID {
		t := m.turns[id]
		if includePayload {
			t.Compression = 0
		} else {
			t.Payload = nil
		}
		out = append([]cxdbcompat.TurnRecord{t}, out...)
	}
	return out
}

func (m *memStore) getLast(ctxID uint64, limit uint32, includePayload bool) ([]byte, error) {
	h, ok := m.heads[ctxID]
	if !ok {
		return nil, notFound("context")
	}
	return cxdbcompat.AppendTurnList(nil, m.chain(h.HeadTurnID, limit, includePayload)), nil
}

func (m *memStore) getBefore(req cxdbcompat.GetBeforeRequest) ([]byte, error) {
	if req.BeforeTurnID == 0 {
		return m.getLast(req.ContextID, req.Limit, req.IncludePayload)
	}
	t, ok := m.turns[req.BeforeTurnID]
	if !ok {
		return nil, notFound("turn")
	}
	return cxdbcompat.AppendTurnList(nil, m.chain(t.ParentTurnID, req.Limit, req.IncludePayload)), nil
}

func (m *memStore) putBlob(req cxdbcompat.PutBlobRequest) ([]byte, error) {
	if blake3.Sum256(req.Data) != req.Hash {
		return nil, invalid("blob hash mismatch")
	}
	_, exists := m.blobs[req.Hash]
	if !exists {
		m.blobs[req.Hash] = bytes.Clone(req.Data)
	}
	return cxdbcompat.PutBlobResponse{Hash: req.Hash, WasNew: !exists}.AppendTo(nil), nil
}

func (m *memStore) attachFS(req cxdbcompat.AttachFSRequest) ([]byte, error) {
	if _, ok := m.turns[req.TurnID]; !ok {
		return nil, notFound("turn")
	}
	if _, ok := m.blobs[req.FSRootHash]; !ok {
		return nil, notFound("fs root tree blob")
	}
	m.fsRoots[req.TurnID] = req.FSRootHash
	return cxdbcompat.AttachFSResponse(req).AppendTo(nil), nil
}

var _ io.Closer = (*Client)(nil)
