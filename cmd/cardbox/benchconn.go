package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// benchConn is the load generator's connection. It drives the protocol as
// the official clients do (HELLO, then one request at a time: write it,
// read its answer, on the caller's goroutine) and skips the per-request
// machinery of this repository's client (a reader goroutine, a channel and
// a context timer per call, a fresh buffer per frame): the load generator
// shares the machine with the server, and every microsecond it spends is
// one the server does not get. It still checks every answer.
type benchConn struct {
	conn  net.Conn
	stop  func() bool // stops closing conn when the context ends
	r     *bufio.Reader
	req   []byte // the request frame being sent
	resp  []byte // the last response payload; reused
	reqID uint64
	calls uint64
}

// serverError is an ERROR frame the server answered.
type serverError struct{ cxdbcompat.ErrorResponse }

func (e *serverError) Error() string {
	return fmt.Sprintf("server error %d %s: %s", e.Code, e.Kind, e.Message)
}

// dialBench connects and says HELLO, with key (an API key of a hosted
// server) in its client tag if given. The connection is closed when ctx
// ends.
func dialBench(ctx context.Context, addr, key string) (*benchConn, error) {
	conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &benchConn{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	c.stop = context.AfterFunc(ctx, func() { conn.Close() })
	tag := "cardbox-bench"
	if key != "" {
		tag += ";key=" + key
	}
	hello := cxdbcompat.HelloRequest{ProtocolVersion: cxdbcompat.ProtocolVersion, ClientTag: tag}
	if _, err := c.call(hello); err != nil {
		c.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	return c, nil
}

// Close closes the connection.
func (c *benchConn) Close() error {
	c.stop()
	return c.conn.Close()
}

// call sends req and returns the payload of its answer, valid until the
// next call. An ERROR frame becomes an error.
func (c *benchConn) call(req cxdbcompat.Request) ([]byte, error) {
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
		return nil, &serverError{e}
	case f.Type != req.MsgType():
		return nil, fmt.Errorf("%s answered with %s", req.MsgType(), f.Type)
	}
	return f.Payload, nil
}

// appendTurn appends payload to the context as the official client sends
// it (msgpack, uncompressed, with its BLAKE3) and checks that the answer is
// for that context and payload.
func (c *benchConn) appendTurn(contextID uint64, payload []byte) error {
	return c.appendKeyed(contextID, payload, nil)
}

// appendKeyed is appendTurn with an idempotency key (none when empty).
func (c *benchConn) appendKeyed(contextID uint64, payload, key []byte) error {
	hash := blake3.Sum256(payload)
	p, err := c.call(cxdbcompat.AppendTurnRequest{
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

// createContext creates an empty context and returns its id.
func (c *benchConn) createContext() (uint64, error) {
	p, err := c.call(cxdbcompat.CtxCreateRequest{})
	if err != nil {
		return 0, err
	}
	h, err := cxdbcompat.DecodeHeadResponse(p)
	if err != nil {
		return 0, err
	}
	return h.ContextID, nil
}
