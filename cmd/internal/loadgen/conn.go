// Package loadgen is the client side of cardbox's load tools (`cardbox
// bench`, `bench-http`, `bench-tenants` and `sample`): a lean connection
// that speaks the CXDB binary protocol and checks every answer, and the
// publishing of the conversation bundle their payloads declare.
package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// Conn is the load generator's connection. Its calls take no context of
// their own: it closes when the context it was dialed with ends. It drives the protocol as
// the official clients do (HELLO, then one request at a time: write it,
// read its answer, on the caller's goroutine) and skips the per-request
// machinery of this repository's client (a reader goroutine, a channel and
// a context timer per call, a fresh buffer per frame): the load generator
// shares the machine with the server, and every microsecond it spends is
// one the server does not get. It still checks every answer.
type Conn struct {
	conn  net.Conn
	stop  func() bool // stops closing conn when the context ends
	r     *bufio.Reader
	req   []byte // the request frame being sent
	resp  []byte // the last response payload; reused
	reqID uint64
	calls uint64
}

// ServerError is an ERROR frame the server answered.
type ServerError struct{ cxdbcompat.ErrorResponse }

func (e *ServerError) Error() string {
	return fmt.Sprintf("server error %d %s: %s", e.Code, e.Kind, e.Message)
}

// Dial connects and says HELLO, with key (an API key of a hosted
// server) in its client tag if given. The connection is closed when ctx
// ends.
func Dial(ctx context.Context, addr, key string) (*Conn, error) {
	conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &Conn{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	c.stop = context.AfterFunc(ctx, func() { conn.Close() })
	tag := "cardbox-bench"
	if key != "" {
		tag += ";key=" + key
	}
	hello := cxdbcompat.HelloRequest{ProtocolVersion: cxdbcompat.ProtocolVersion, ClientTag: tag}
	if _, err := c.Call(hello); err != nil {
		c.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	return c, nil
}

// Close closes the connection.
func (c *Conn) Close() error {
	c.stop()
	return c.conn.Close()
}

// Call sends req and returns the payload of its answer, valid until the
// next call. An ERROR frame becomes an error.
func (c *Conn) Call(req cxdbcompat.Request) ([]byte, error) {
	c.reqID++
	buf, start := cxdbcompat.StartFrame(c.req[:0], req.MsgType(), req.Flags(), c.reqID)
	buf, err := cxdbcompat.FinishFrame(req.AppendTo(buf), start)
	if err != nil {
		return nil, err
	}
	c.req = buf
	if _, err := c.conn.Write(buf); err != nil {
		return nil, err
	}
	f, err := cxdbcompat.ReadFrame(c.r, c.resp)
	if err != nil {
		return nil, err
	}
	c.resp = f.Payload
	switch {
	case f.ReqID != c.reqID:
		return nil, fmt.Errorf("answer to request %d, want %d", f.ReqID, c.reqID)
	case f.Type == cxdbcompat.MsgError:
		e, err := cxdbcompat.DecodeErrorResponse(f.Payload)
		if err != nil {
			return nil, fmt.Errorf("undecodable ERROR frame: %w", err)
		}
		return nil, &ServerError{e}
	case f.Type != req.MsgType():
		return nil, fmt.Errorf("%s answered with %s", req.MsgType(), f.Type)
	}
	return f.Payload, nil
}

// AppendTurn appends payload to the context as the official client sends
// it (msgpack, uncompressed, with its BLAKE3) and checks that the answer is
// for that context and payload.
func (c *Conn) AppendTurn(contextID uint64, payload []byte) error {
	return c.AppendKeyed(contextID, payload, nil)
}

// AppendKeyed is AppendTurn with an idempotency key (none when empty).
func (c *Conn) AppendKeyed(contextID uint64, payload, key []byte) error {
	hash := blake3.Sum256(payload)
	p, err := c.Call(cxdbcompat.AppendTurnRequest{
		ContextID: contextID, DeclaredTypeID: "cxdb.ConversationItem", DeclaredTypeVersion: 3,
		Encoding: cxdbcompat.EncodingMsgpack, UncompressedLen: uint32(len(payload)),
		ContentHash: hash, Payload: payload, IdempotencyKey: key,
	})
	if err != nil {
		return err
	}
	res, err := cxdbcompat.DecodeAppendTurnResponse(p)
	if err != nil {
		return err
	}
	if res.ContextID != contextID || res.ContentHash != hash {
		return fmt.Errorf("answer for context %d, hash %x; sent context %d, hash %x", res.ContextID, res.ContentHash, contextID, hash)
	}
	return nil
}

// CreateContext creates an empty context and returns its id.
func (c *Conn) CreateContext() (uint64, error) {
	p, err := c.Call(cxdbcompat.CtxCreateRequest{})
	if err != nil {
		return 0, err
	}
	h, err := cxdbcompat.DecodeHeadResponse(p)
	if err != nil {
		return 0, err
	}
	return h.ContextID, nil
}
