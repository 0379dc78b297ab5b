package sdk

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cardboxhq/cardbox/sdk/internal/wire"
)

// connError is a failure of the connection itself (dial, write, read):
// the request may or may not have reached the server, and a retry on a
// fresh connection is safe for every request this SDK sends.
type connError struct{ err error }

func (e *connError) Error() string { return "connection: " + e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

// conn is one binary-protocol connection. Requests are pipelined: each
// gets a req_id and waits for the frame that echoes it; one reader
// goroutine, owned by the conn and stopped by close, delivers frames.
type conn struct {
	nc     net.Conn
	nextID atomic.Uint64

	// Requests are queued for one writer goroutine, which sends all that
	// wait in one write: with many in flight, one system call carries
	// many frames (it was a write per request, 28 % of the SDK's CPU
	// at 64 in flight).
	wmu sync.Mutex
	out outbox
	// wake (buffered) tells the writer that requests wait.
	wake      chan struct{}
	writeDone chan struct{}

	mu      sync.Mutex
	pending map[uint64]chan wire.Frame
	err     error // set once the connection failed; pending is then nil

	readDone chan struct{}
	caps     Capabilities
}

// helloMeta is the HELLO client metadata the SDK sends.
type helloMeta struct {
	APIKey       string `json:"api_key,omitempty"`
	Capabilities bool   `json:"capabilities"`
}

// dialConn connects, starts the reader and says HELLO with the API key in
// the client metadata.
func dialConn(ctx context.Context, cfg *Config) (*conn, error) {
	d := &net.Dialer{Timeout: cfg.DialTimeout}
	var nc net.Conn
	var err error
	if cfg.TLS != nil {
		nc, err = (&tls.Dialer{NetDialer: d, Config: cfg.TLS}).DialContext(ctx, "tcp", cfg.BinaryAddr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", cfg.BinaryAddr)
	}
	if err != nil {
		return nil, &connError{fmt.Errorf("dial %s: %w", cfg.BinaryAddr, err)}
	}
	c := &conn{
		nc: nc, pending: map[uint64]chan wire.Frame{}, readDone: make(chan struct{}),
		wake: make(chan struct{}, 1), writeDone: make(chan struct{}),
	}
	go c.readLoop()
	go c.writeLoop()
	// Capabilities are asked for: a server that knows the member answers
	// them after HELLO's 10 bytes, others ignore it.
	meta, _ := json.Marshal(helloMeta{APIKey: cfg.APIKey, Capabilities: true})
	f, err := c.roundTrip(ctx, wire.MsgHello, 0, wire.Hello(cfg.ClientTag, meta))
	if err == nil && f.Type == wire.MsgError {
		err = serverError(f.Payload)
	}
	if err == nil {
		var extra []byte
		_, extra, err = wire.DecodeHello(f.Payload)
		c.caps = parseCapabilities(extra)
	}
	if err != nil {
		c.close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	return c, nil
}

// readLoop delivers frames to their requests until the connection fails
// or is closed. Frames nobody waits for (their request gave up) are
// dropped.
func (c *conn) readLoop() {
	defer close(c.readDone)
	r := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		f, err := wire.ReadFrame(r)
		if err != nil {
			c.fail(&connError{fmt.Errorf("read: %w", err)})
			return
		}
		c.mu.Lock()
		ch, ok := c.pending[f.ReqID]
		delete(c.pending, f.ReqID)
		c.mu.Unlock()
		if ok {
			ch <- f
		}
	}
}

// fail records the connection's first failure, wakes every waiting
// request (a closed channel) and closes the socket.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, ch := range pending {
		close(ch)
	}
	_ = c.nc.Close()
}

// broken reports whether the connection has failed.
func (c *conn) broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// close fails the connection and waits for its reader and writer to
// stop.
func (c *conn) close() {
	c.fail(&connError{ErrClosed})
	<-c.readDone
	<-c.writeDone
}

// roundTrip sends one request and waits for its answer. A context that
// ends while waiting leaves the connection usable (the late answer is
// dropped); a write that outlasts the deadlines of the requests it carries
// breaks it, since the stream is then out of frame.
func (c *conn) roundTrip(ctx context.Context, typ, flags uint16, payload []byte) (wire.Frame, error) {
	if len(payload) > wire.MaxPayload {
		return wire.Frame{}, fmt.Errorf("%w: %v: %d bytes", ErrInvalid, wire.ErrFrameTooLarge, len(payload))
	}
	id := c.nextID.Add(1)
	ch := make(chan wire.Frame, 1)
	c.mu.Lock()
	if c.pending == nil {
		err := c.err
		c.mu.Unlock()
		return wire.Frame{}, err
	}
	c.pending[id] = ch
	c.mu.Unlock()
	c.send(ctx, typ, flags, id, payload)
	select {
	case f, ok := <-ch:
		if !ok {
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return wire.Frame{}, err
		}
		return f, nil
	case <-ctx.Done():
		c.forget(id)
		return wire.Frame{}, ctx.Err()
	}
}

func (c *conn) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// send queues a request for the writer. A failed write fails the
// connection, which wakes every waiting request.
func (c *conn) send(ctx context.Context, typ, flags uint16, id uint64, payload []byte) {
	c.wmu.Lock()
	first := c.out.empty()
	c.out.add(ctx, typ, flags, id, payload)
	c.wmu.Unlock()
	if first {
		select {
		case c.wake <- struct{}{}:
		default: // the writer has yet to take the last wake-up, and will find this too
		}
	}
}

// writeLoop sends the queued requests, all that wait at once, until the
// connection fails or is closed.
func (c *conn) writeLoop() {
	defer close(c.writeDone)
	var batch outbox
	for {
		select {
		case <-c.wake:
		case <-c.readDone: // failed or closed: nothing more will be read
			return
		}
		c.wmu.Lock()
		batch, c.out = c.out, batch.recycled()
		c.wmu.Unlock()
		if batch.empty() {
			continue
		}
		_ = c.nc.SetWriteDeadline(batch.deadline())
		if _, err := c.nc.Write(batch.frames); err != nil {
			c.fail(&connError{fmt.Errorf("write: %w", err)})
			return
		}
	}
}

// outbox is requests waiting for the writer: their frames back to back,
// and the latest deadline of their contexts.
type outbox struct {
	frames    []byte
	latest    time.Time
	unbounded bool // a request's context has no deadline
}

// keptOutbox is the most an outbox's buffer keeps for the next batch: one
// that held a large blob is let go.
const keptOutbox = 1 << 20

func (o *outbox) empty() bool { return len(o.frames) == 0 }

func (o *outbox) add(ctx context.Context, typ, flags uint16, id uint64, payload []byte) {
	// The size was checked by roundTrip: this cannot fail.
	o.frames, _ = wire.AppendFrame(o.frames, typ, flags, id, payload)
	if d, ok := ctx.Deadline(); !ok {
		o.unbounded = true
	} else if d.After(o.latest) {
		o.latest = d
	}
}

// deadline is the write deadline of the batch: the latest of its requests'
// deadlines, none if one has none.
func (o *outbox) deadline() time.Time {
	if o.unbounded {
		return time.Time{}
	}
	return o.latest
}

// recycled is an empty outbox on o's buffer, when it is not too large.
func (o outbox) recycled() outbox {
	if cap(o.frames) > keptOutbox {
		return outbox{}
	}
	return outbox{frames: o.frames[:0]}
}

// pool is a few connections used round robin. A broken connection is
// replaced by the next request that picks its slot.
type pool struct {
	cfg   *Config
	next  atomic.Uint64
	slots []slot

	mu     sync.Mutex
	closed bool
}

type slot struct {
	mu sync.Mutex
	c  *conn
}

func newPool(cfg *Config) *pool {
	return &pool{cfg: cfg, slots: make([]slot, cfg.Conns)}
}

// get returns a live connection, dialling one if its slot has none.
func (p *pool) get(ctx context.Context) (*conn, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	s := &p.slots[p.next.Add(1)%uint64(len(p.slots))]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil && !s.c.broken() {
		return s.c, nil
	}
	if s.c != nil {
		s.c.close()
		s.c = nil
	}
	c, err := dialConn(ctx, p.cfg)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.close()
		return nil, ErrClosed
	}
	s.c = c
	return c, nil
}

// capabilities are those of any live connection (all reach one server).
func (p *pool) capabilities() Capabilities {
	for i := range p.slots {
		s := &p.slots[i]
		s.mu.Lock()
		c := s.c
		s.mu.Unlock()
		if c != nil {
			return c.caps
		}
	}
	return Capabilities{}
}

func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	for i := range p.slots {
		s := &p.slots[i]
		s.mu.Lock()
		if s.c != nil {
			s.c.close()
			s.c = nil
		}
		s.mu.Unlock()
	}
}

// serverError decodes an ERROR frame.
func serverError(payload []byte) *ServerError {
	e := wire.DecodeError(payload)
	return &ServerError{Code: int(e.Code), Kind: e.Kind, Message: e.Message, Details: e.Details}
}

// retryable reports whether err may go away on a retry.
func retryable(err error) bool {
	var ce *connError
	if errors.As(err, &ce) {
		return !errors.Is(err, ErrClosed)
	}
	var se *ServerError
	return errors.As(err, &se) && se.retryable()
}

// backoff is the wait before attempt n (from 1): exponential from
// cfg.RetryBase to cfg.RetryMax, with up to half of it added at random so
// that many clients do not come back at once.
func backoff(cfg *Config, n int) time.Duration {
	d := cfg.RetryBase << min(n-1, 20)
	if d <= 0 || d > cfg.RetryMax {
		d = cfg.RetryMax
	}
	return d + rand.N(d/2+1)
}
