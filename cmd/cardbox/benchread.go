package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/zeebo/blake3"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// readConn is the read phase's connection. It sends what the official
// clients send (HELLO, then one request at a time) but skips their
// per-request machinery (a reader goroutine, a channel and a context timer
// per call, a fresh buffer per response, a decoded record per turn): the
// load generator shares the machine with the server, and every microsecond
// it spends is one the server does not get. It still reads and checks every
// byte of every answer (see checkTurnList).
type readConn struct {
	conn  net.Conn
	stop  func() bool // stops closing conn when the context ends
	r     *bufio.Reader
	req   []byte // the request frame being sent
	resp  []byte // the last response payload; reused
	reqID uint64
	calls uint64
}

// dialRead connects and says HELLO. The connection is closed when ctx
// ends.
func dialRead(ctx context.Context, addr string) (*readConn, error) {
	conn, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &readConn{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	c.stop = context.AfterFunc(ctx, func() { conn.Close() })
	hello := cxdbcompat.HelloRequest{ProtocolVersion: cxdbcompat.ProtocolVersion, ClientTag: "cardbox-bench"}
	if _, err := c.call(hello); err != nil {
		c.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	return c, nil
}

// Close closes the connection.
func (c *readConn) Close() error {
	c.stop()
	return c.conn.Close()
}

// call sends req and returns the payload of its answer, valid until the
// next call. An ERROR frame becomes an error.
func (c *readConn) call(req cxdbcompat.Request) ([]byte, error) {
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
		return nil, fmt.Errorf("server error %d %s: %s", e.Code, e.Kind, e.Message)
	case f.Type != req.MsgType():
		return nil, fmt.Errorf("%s answered with %s", req.MsgType(), f.Type)
	}
	return f.Payload, nil
}

// hashCheckEvery is how often (in calls per connection) getLast also
// checks every payload against its BLAKE3 content hash.
const hashCheckEvery = 64

// getLast runs GET_LAST(limit, with payload) and checks the answer; it
// returns the number of turns.
func (c *readConn) getLast(contextID uint64, limit uint32) (int, error) {
	p, err := c.call(cxdbcompat.GetLastRequest{ContextID: contextID, Limit: limit, IncludePayload: true})
	if err != nil {
		return 0, err
	}
	c.calls++
	n, err := checkTurnList(p, limit, c.calls%hashCheckEvery == 0)
	if err != nil {
		return 0, fmt.Errorf("context %d: %w", contextID, err)
	}
	return n, nil
}

// turnFixed is the size of a turn record's fixed fields before the type
// id (turn_id, parent_turn_id, depth, type id length) and after it
// (version, encoding, compression, uncompressed_len, hash, payload_len).
const (
	turnHead = 8 + 8 + 4 + 4
	turnTail = 4*4 + cxdbcompat.HashSize + 4
)

var errShort = errors.New("turn list truncated")

// checkTurnList walks a GET_LAST answer without allocating and checks
// that it holds 1 to limit turns that form one chain (each the parent of
// the next, depth rising by one), each with its payload included whole
// (uncompressed, payload_len = uncompressed_len), and nothing after them.
// With hashes it also checks each payload's BLAKE3 against its hash.
func checkTurnList(p []byte, limit uint32, hashes bool) (int, error) {
	le := binary.LittleEndian
	if len(p) < 4 {
		return 0, errShort
	}
	count := le.Uint32(p)
	if count == 0 || count > limit {
		return 0, fmt.Errorf("%d turns, want 1 to %d", count, limit)
	}
	p = p[4:]
	var prevID uint64
	var prevDepth uint32
	for i := range count {
		if len(p) < turnHead {
			return 0, errShort
		}
		id, parent, depth := le.Uint64(p), le.Uint64(p[8:]), le.Uint32(p[16:])
		if i > 0 && (parent != prevID || depth != prevDepth+1) {
			return 0, fmt.Errorf("turn %d (parent %d, depth %d) does not follow turn %d (depth %d)", id, parent, depth, prevID, prevDepth)
		}
		prevID, prevDepth = id, depth
		typeLen := uint64(le.Uint32(p[20:]))
		if uint64(len(p)) < turnHead+typeLen+turnTail {
			return 0, errShort
		}
		p = p[turnHead+typeLen:]
		compression, rawLen, payloadLen := le.Uint32(p[8:]), le.Uint32(p[12:]), le.Uint32(p[48:])
		if compression != cxdbcompat.CompressionNone || payloadLen != rawLen || payloadLen == 0 {
			return 0, fmt.Errorf("turn %d: payload of %d bytes (compression %d, uncompressed_len %d), want it whole", id, payloadLen, compression, rawLen)
		}
		hash := p[16 : 16+cxdbcompat.HashSize]
		p = p[turnTail:]
		if uint64(len(p)) < uint64(payloadLen) {
			return 0, errShort
		}
		if hashes && blake3.Sum256(p[:payloadLen]) != [32]byte(hash) {
			return 0, fmt.Errorf("turn %d: payload does not match its content hash", id)
		}
		p = p[payloadLen:]
	}
	if len(p) != 0 {
		return 0, fmt.Errorf("%d bytes after the last turn", len(p))
	}
	return int(count), nil
}
