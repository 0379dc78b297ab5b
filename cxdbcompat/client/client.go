// Package client is a Go client for the CXDB binary protocol that sends
// exactly what the official CXDB Go client (strongdm/cxdb clients/go)
// sends: HELLO first on dial, then one request per frame.
//
// A Client owns one connection and one reader goroutine that matches
// response frames to requests by req_id, so Do supports several requests in
// flight. The typed methods are serialised (one in flight) by default, like
// the official client; see WithPipelining. All methods are safe for
// concurrent use and honour context cancellation and deadlines.
package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat"
)

// Client is a connection to a CXDB-compatible server.
type Client struct {
	conn      net.Conn
	opts      options
	sessionID uint64
	nextID    atomic.Uint64
	// sem serialises the typed methods; nil with WithPipelining.
	sem chan struct{}

	writeMu sync.Mutex // one frame written at a time

	mu      sync.Mutex
	pending map[uint64]chan<- result // nil once the client failed
	err     error                    // terminal error, set once

	closeOnce sync.Once
	readDone  chan struct{} // closed when the reader goroutine exits
}

// result is what the reader goroutine delivers to a waiting request.
type result struct {
	typ     cxdbcompat.MsgType
	payload []byte
	err     error
}

// Dial connects to addr (host:port), sends HELLO and returns the Client.
// The dial is bounded by ctx and the dial timeout (WithDialTimeout); use
// WithTLS for a TLS connection.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	o := applyOptions(opts)
	conn, err := dialConn(ctx, addr, o)
	if err != nil {
		return nil, fmt.Errorf("cxdb client: dial %s: %w", addr, err)
	}
	return newClient(ctx, conn, o)
}

func dialConn(ctx context.Context, addr string, o options) (net.Conn, error) {
	d := &net.Dialer{Timeout: o.dialTimeout}
	if o.tlsConfig != nil {
		td := &tls.Dialer{NetDialer: d, Config: o.tlsConfig}
		return td.DialContext(ctx, "tcp", addr)
	}
	return d.DialContext(ctx, "tcp", addr)
}

// NewClient takes ownership of an established connection, sends HELLO and
// returns the Client. On error conn is closed.
func NewClient(ctx context.Context, conn net.Conn, opts ...Option) (*Client, error) {
	return newClient(ctx, conn, applyOptions(opts))
}

func newClient(ctx context.Context, conn net.Conn, o options) (*Client, error) {
	c := &Client{
		conn:     conn,
		opts:     o,
		pending:  make(map[uint64]chan<- result),
		readDone: make(chan struct{}),
	}
	if !o.pipelining {
		c.sem = make(chan struct{}, 1)
	}
	go c.readLoop()
	if err := c.hello(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Client) hello(ctx context.Context) error {
	if len(c.opts.clientMeta) > 0 && !json.Valid(c.opts.clientMeta) {
		return errors.New("cxdb client: hello: client meta is not valid JSON")
	}
	req := cxdbcompat.HelloRequest{
		ProtocolVersion: cxdbcompat.ProtocolVersion,
		ClientTag:       c.opts.clientTag,
		ClientMetaJSON:  c.opts.clientMeta,
	}
	if err := req.Validate(); err != nil {
		return fmt.Errorf("cxdb client: %w", err)
	}
	payload, err := c.call(ctx, req)
	if err != nil {
		return err
	}
	resp, err := cxdbcompat.DecodeHelloResponse(payload)
	if err != nil {
		return fmt.Errorf("cxdb client: decode HELLO response: %w", err)
	}
	c.sessionID = resp.SessionID
	return nil
}

// SessionID returns the session id the server assigned in its HELLO
// response.
func (c *Client) SessionID() uint64 { return c.sessionID }

// Close closes the connection, fails requests in flight with ErrClosed and
// waits for the reader goroutine to exit. It is safe to call more than
// once; later calls return nil.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.mu.Lock()
		if c.err == nil {
			c.err = ErrClosed
		}
		c.mu.Unlock()
		err = c.conn.Close()
		<-c.readDone
		if errors.Is(err, net.ErrClosed) {
			err = nil // the reader already closed it after a failure
		}
	})
	return err
}

// Do sends one request frame and waits for the frame answering it (same
// req_id). It returns the response type and payload verbatim: an ERROR
// frame is returned as cxdbcompat.MsgError with its payload, not as an
// error. Several Do calls may be in flight at once. The returned payload is
// owned by the caller.
//
// If ctx ends first, Do returns its error; the connection stays usable and
// the late response is discarded, unless the request was only partly
// written, in which case the connection is closed.
func (c *Client) Do(ctx context.Context, typ cxdbcompat.MsgType, flags uint16, payload []byte) (cxdbcompat.MsgType, []byte, error) {
	return c.roundTrip(ctx, typ, flags, func(dst []byte) []byte { return append(dst, payload...) })
}

// call runs a typed request (serialised unless pipelining) and returns the
// payload of a response of the request's own type; ERROR frames become
// *ServerError.
func (c *Client) call(ctx context.Context, req cxdbcompat.Request) ([]byte, error) {
	if err := c.acquire(ctx); err != nil {
		return nil, fmt.Errorf("cxdb client: %s: %w", req.MsgType(), err)
	}
	defer c.release()
	typ, payload, err := c.roundTrip(ctx, req.MsgType(), req.Flags(), req.AppendTo)
	switch {
	case err != nil:
		return nil, err
	case typ == cxdbcompat.MsgError:
		return nil, serverError(payload)
	case typ != req.MsgType():
		return nil, fmt.Errorf("%w: %s answered with %s", ErrUnexpectedResponse, req.MsgType(), typ)
	}
	return payload, nil
}

func (c *Client) acquire(ctx context.Context) error {
	if c.sem == nil {
		return nil
	}
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) release() {
	if c.sem != nil {
		<-c.sem
	}
}

func (c *Client) roundTrip(ctx context.Context, typ cxdbcompat.MsgType, flags uint16, encode func([]byte) []byte) (cxdbcompat.MsgType, []byte, error) {
	if _, ok := ctx.Deadline(); !ok && c.opts.requestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.requestTimeout)
		defer cancel()
	}
	id := c.nextID.Add(1)
	ch, err := c.register(id)
	if err != nil {
		return 0, nil, fmt.Errorf("cxdb client: %s: %w", typ, err)
	}
	if err := c.send(ctx, typ, flags, id, encode); err != nil {
		c.unregister(id)
		return 0, nil, fmt.Errorf("cxdb client: %s: %w", typ, err)
	}
	select {
	case res := <-ch:
		if res.err != nil {
			return 0, nil, fmt.Errorf("cxdb client: %s: %w", typ, res.err)
		}
		return res.typ, res.payload, nil
	case <-ctx.Done():
		c.unregister(id)
		return 0, nil, fmt.Errorf("cxdb client: %s: %w", typ, ctx.Err())
	}
}

// register records a pending request; the channel receives exactly one
// result unless the request is unregistered first.
func (c *Client) register(id uint64) (<-chan result, error) {
	ch := make(chan result, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return nil, c.err
	}
	c.pending[id] = ch
	return ch, nil
}

func (c *Client) unregister(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// fail makes err the terminal error (unless one is set), fails every
// pending request and closes the connection.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	err = c.err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, ch := range pending {
		ch <- result{err: err}
	}
	_ = c.conn.Close()
}

// readLoop delivers response frames to pending requests until the
// connection fails or is closed. Frames for unknown req_ids (answers to
// requests whose context ended) are dropped.
func (c *Client) readLoop() {
	defer close(c.readDone)
	r := bufio.NewReaderSize(c.conn, 64<<10)
	for {
		f, err := cxdbcompat.ReadFrame(r, nil)
		if err != nil {
			c.fail(fmt.Errorf("connection lost: read response: %w", err))
			return
		}
		c.mu.Lock()
		ch, ok := c.pending[f.ReqID]
		delete(c.pending, f.ReqID)
		c.mu.Unlock()
		if ok {
			ch <- result{typ: f.Type, payload: f.Payload}
		}
	}
}

// bufPool holds frame encoding buffers; large ones are not kept.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBuf = 1 << 20

// send encodes and writes one frame, interrupting the write when ctx ends.
// A write error after some bytes went out leaves the stream unusable, so
// the connection is failed.
func (c *Client) send(ctx context.Context, typ cxdbcompat.MsgType, flags uint16, id uint64, encode func([]byte) []byte) error {
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledBuf {
			bufPool.Put(bp)
		}
	}()
	buf, start := cxdbcompat.StartFrame((*bp)[:0], typ, flags, id)
	buf, err := cxdbcompat.FinishFrame(encode(buf), start)
	*bp = buf
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	n, err := c.writeCtx(ctx, buf)
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = ctxErr
	}
	if n > 0 {
		c.fail(fmt.Errorf("connection lost: partial write: %w", err))
	}
	return err
}

// aLongTimeAgo is a deadline in the past, used to interrupt a write.
var aLongTimeAgo = time.Unix(1, 0)

// writeCtx writes buf, setting a past write deadline if ctx ends during the
// write. The caller holds writeMu.
func (c *Client) writeCtx(ctx context.Context, buf []byte) (int, error) {
	var (
		mu          sync.Mutex
		done        bool
		interrupted bool
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			interrupted = true
			_ = c.conn.SetWriteDeadline(aLongTimeAgo)
		}
	})
	n, err := c.conn.Write(buf)
	stop()
	mu.Lock()
	done = true
	wasInterrupted := interrupted
	mu.Unlock()
	if wasInterrupted {
		_ = c.conn.SetWriteDeadline(time.Time{})
	}
	return n, err
}
