package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/store"
)

// What a client can make the server hold is bounded three ways:
//
//   - Time: a session idle between frames for IdleTimeout is closed; once
//     a frame starts, its bytes must keep coming (no pause over
//     FrameTimeout, and on average MinFrameRate after the first
//     FrameTimeout); a response must be taken by the peer within
//     WriteTimeout plus its size at MinWriteRate, else the session is
//     closed.
//   - Request memory: payload bytes beyond the first freeFrameBytes of a
//     frame are charged to MaxInFlightBytes as they arrive and until the
//     request is answered; when it is spent, readers wait (and stop
//     reading their sockets) until requests finish or stalled frames are
//     cut.
//   - Response memory: a GET_LAST or GET_BEFORE whose answer will be large
//     (its size is known from the turns' metadata) runs one at a time per
//     session and is charged to MaxReplyBytes before it is built and until
//     it is written; a GET_BLOB, whose size is known only once read, runs
//     one at a time per session and at most maxBuilds at once, and its
//     answer is charged once built. A peer that stops reading holds one
//     answer, until its write deadline closes the session.
//
// Small frames and small answers are not charged, so that GET_HEAD and the
// like stay fast while the budgets are spent by others.

// Defaults of the limits in Options.
const (
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultFrameTimeout     = 10 * time.Second
	DefaultMinFrameRate     = 64 << 10 // bytes per second
	DefaultWriteTimeout     = 30 * time.Second
	DefaultMinWriteRate     = 1 << 20 // bytes per second
	DefaultMaxInFlightBytes = 64 << 20
	DefaultMaxReplyBytes    = 64 << 20
)

const (
	// freeFrameBytes of each frame are not charged: with at most so many
	// connections, they are bounded anyway.
	freeFrameBytes = 64 << 10
	// maxBuilds is how many payload-carrying answers are built at once.
	maxBuilds = 4
	// readBufferSize is a session's read buffer: small, since idle
	// sessions may be many, and large payloads are read past it.
	readBufferSize = 16 << 10
)

// withLimitDefaults fills in the zero limits of o.
func withLimitDefaults(o Options) Options {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.IdleTimeout, DefaultIdleTimeout)
	def(&o.FrameTimeout, DefaultFrameTimeout)
	def(&o.WriteTimeout, DefaultWriteTimeout)
	def(&o.handlerLinger, defaultHandlerLinger)
	if o.MinFrameRate <= 0 {
		o.MinFrameRate = DefaultMinFrameRate
	}
	if o.MinWriteRate <= 0 {
		o.MinWriteRate = DefaultMinWriteRate
	}
	if o.MaxInFlightBytes <= 0 {
		o.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if o.MaxReplyBytes <= 0 {
		o.MaxReplyBytes = DefaultMaxReplyBytes
	}
	// One whole frame must always fit, or it would wait forever: in the
	// budget, and in a tenant's share of it.
	whole := float64(cxdbcompat.MaxPayload + cxdbcompat.HeaderSize + 1)
	if o.TenantShare > 0 && o.TenantShare < 1 {
		whole /= o.TenantShare
	}
	o.MaxInFlightBytes = max(o.MaxInFlightBytes, int64(whole))
	o.MaxReplyBytes = max(o.MaxReplyBytes, int64(whole))
	return o
}

// pacedReader sets the connection's read deadline before each read from
// it, as the limits above say.
type pacedReader struct {
	conn    net.Conn
	opts    *Options
	stopped atomic.Bool  // set by stop: every read fails at once...
	drain   atomic.Int64 // ...or, when set (unix ns), at this time
	inFrame bool
	helloBy time.Time // when authentication is due; zero once done or not required
	start   time.Time // when the frame's first bytes arrived
	got     int64     // bytes read since
}

// Read implements io.Reader.
func (p *pacedReader) Read(b []byte) (int, error) {
	now := time.Now()
	_ = p.conn.SetReadDeadline(p.deadline(now))
	if p.stopped.Load() { // stop may have run between the two lines above
		_ = p.conn.SetReadDeadline(time.Unix(0, p.drain.Load()))
	}
	n, err := p.conn.Read(b)
	if n > 0 && !p.inFrame {
		// The frame starts when its first bytes arrive, not when the
		// idle read began.
		p.inFrame, p.start, p.got = true, time.Now(), 0
	}
	p.got += int64(n)
	return n, err
}

func (p *pacedReader) deadline(now time.Time) time.Time {
	d := p.frameDeadline(now)
	if !p.helloBy.IsZero() && p.helloBy.Before(d) {
		return p.helloBy
	}
	return d
}

func (p *pacedReader) frameDeadline(now time.Time) time.Time {
	if !p.inFrame {
		return now.Add(p.opts.IdleTimeout)
	}
	stall := now.Add(p.opts.FrameTimeout)
	rate := p.start.Add(p.opts.FrameTimeout + time.Duration(p.got)*time.Second/time.Duration(p.opts.MinFrameRate))
	if rate.Before(stall) {
		return rate
	}
	return stall
}

// frameDone says the frame being read is complete: what follows is idle
// time until the next one.
func (p *pacedReader) frameDone() { p.inFrame = false }

// stop makes the read in progress, and every later one, fail at once.
func (p *pacedReader) stop() {
	p.stopped.Store(true)
	_ = p.conn.SetReadDeadline(time.Now())
}

// drainFor lets reads after stop go on until d from now, to collect the
// frames the peer had already sent.
func (p *pacedReader) drainFor(d time.Duration) {
	p.drain.Store(time.Now().Add(d).UnixNano())
}

// frameCharge counts the bytes of one frame charged to the server's
// request budget.
type frameCharge struct {
	s       *session
	tenant  string // charged to, from the frame's first charge
	total   int64  // bytes room was made for
	charged int64  // of which charged
}

// reserve is the cxdbcompat.ReadFrameReserving hook: it charges room
// beyond freeFrameBytes, waiting while the budget is spent, but no longer
// than a frame may pause (a frame that cannot go on is a stalled frame,
// and a session blocked here would not see its peer leave), and not past
// the server's shutdown.
//
// A frame waits holding nothing and takes all it needs at once: two
// frames each holding part of the budget and each waiting for more than
// is left would wait for each other until the frame timeout. While it
// waits, the bytes it has read go uncharged; they are under a MiB, as a
// frame past its first MiB asks for the rest at once
// (cxdbcompat.ReadFrameReserving).
func (c *frameCharge) reserve(n int) error {
	c.total += int64(n)
	need := max(0, c.total-freeFrameBytes) - c.charged
	if need <= 0 {
		return nil
	}
	b, m := c.s.srv.bytes, c.s.srv.metrics
	if c.charged == 0 {
		c.tenant = c.s.tenant.ID
	}
	if b.TryAcquire(c.tenant, need) {
		c.charged += need
		m.requestBytes.Add(need)
		return nil
	}
	all := c.charged + need
	c.release()
	ctx, cancel := context.WithTimeout(c.s.reading, c.s.srv.opts.FrameTimeout)
	defer cancel()
	m.framesWaiting.Add(1)
	defer m.framesWaiting.Add(-1)
	c.tenant = c.s.tenant.ID
	if err := b.acquire(ctx, c.tenant, all); err != nil {
		return fmt.Errorf("no room for %d bytes of a frame within %v: %w", all, c.s.srv.opts.FrameTimeout, err)
	}
	c.charged = all
	m.requestBytes.Add(all)
	return nil
}

// chargeDeclared charges a compressed APPEND_TURN for the bytes it will
// decompress to, as declared (decompression stops there), on top of its
// frame: a small frame declaring a large payload costs what it
// declared, and waits for room as a large frame does.
func (s *session) chargeDeclared(f cxdbcompat.Frame, charge *frameCharge) error {
	if f.Type != cxdbcompat.MsgAppendTurn {
		return nil
	}
	comp, n, ok := cxdbcompat.AppendTurnSize(f.Payload)
	if !ok || comp != cxdbcompat.CompressionZstd || n > cxdbcompat.MaxPayload {
		return nil // the handler refuses what is malformed or too large
	}
	if err := charge.reserve(int(n)); err != nil {
		return fault.New(fault.Unavailable, "no room for the payload's declared %d bytes now; retry", n)
	}
	return nil
}

// release gives the charged bytes back.
// The gauge goes down first: bytes given back may be taken at once by a
// frame that waited for them, which then counts them.
func (c *frameCharge) release() {
	if c.charged > 0 {
		c.s.srv.metrics.requestBytes.Add(-c.charged)
		c.s.srv.bytes.release(c.tenant, c.charged)
		c.charged = 0
	}
}

// turnListSize estimates the answer to a GET_LAST or GET_BEFORE that
// carries payloads, from the turns' metadata (a walk of memory, without
// payloads). ok is false for other requests, for requests without
// payloads and for requests the handler will refuse.
func (s *session) turnListSize(f cxdbcompat.Frame) (size int64, ok bool) {
	var turns []store.Turn
	var err error
	switch f.Type {
	case cxdbcompat.MsgGetLast:
		req, derr := cxdbcompat.DecodeGetLastRequest(f.Payload)
		if derr != nil || !req.IncludePayload {
			return 0, false
		}
		turns, err = s.srv.opts.Store.Last(s.ctx, s.tenant, req.ContextID, req.Limit, false)
	case cxdbcompat.MsgGetBefore:
		req, derr := cxdbcompat.DecodeGetBeforeRequest(f.Payload)
		if derr != nil || !req.IncludePayload {
			return 0, false
		}
		turns, err = s.srv.opts.Store.Before(s.ctx, s.tenant, req.ContextID, req.BeforeTurnID, req.Limit, false)
	default:
		return 0, false
	}
	if err != nil {
		return 0, false
	}
	size = cxdbcompat.HeaderSize + 4 + 1
	for i := range turns {
		size += turnRecordFixed + int64(len(turns[i].TypeID)) + int64(turns[i].UncompressedLen)
	}
	return min(size, cxdbcompat.HeaderSize+cxdbcompat.MaxPayload), true
}

// chargeReply takes n bytes of the reply budget for an answer about to be
// built, and returns how to give them back.
func (s *session) chargeReply(ctx context.Context, n int64) (release func(), err error) {
	tenant := s.tenant.ID
	if err := s.srv.replies.acquire(ctx, tenant, n); err != nil {
		return nil, err
	}
	s.srv.metrics.replyBytes.Add(n)
	return func() {
		s.srv.replies.release(tenant, n)
		s.srv.metrics.replyBytes.Add(-n)
	}, nil
}

// buildLarge runs build for a request whose answer's size is not known
// before (GET_BLOB) within the response limits, and returns its answer and
// the reply bytes charged for it, to release once written.
func (s *session) buildLarge(ctx context.Context, tenant string, build func() []byte) ([]byte, int64, error) {
	if err := s.srv.builds.Acquire(ctx, 1); err != nil {
		return nil, 0, err
	}
	defer s.srv.builds.Release(1)
	resp := build()
	n := int64(len(resp))
	if n <= freeFrameBytes {
		return resp, 0, nil
	}
	if err := s.srv.replies.acquire(ctx, tenant, n); err != nil {
		recycleFrame(resp)
		return nil, 0, err
	}
	s.srv.metrics.replyBytes.Add(n)
	return resp, n, nil
}

// writeDeadline is how long the peer has to take a response of n bytes.
func (s *session) writeDeadline(n int) time.Time {
	return time.Now().Add(s.srv.opts.WriteTimeout + time.Duration(n)*time.Second/time.Duration(s.srv.opts.MinWriteRate))
}

// RefuseConn tells a connection over the server's connection limit why it
// is closed: an ERROR 503 frame with request id 0 (see connlimit).
func RefuseConn(c net.Conn) {
	_, _ = c.Write(errorFrame(0, fault.New(fault.TooManyConnections, "the server is at its connection limit; retry later")))
}

// drainWindow is how long a stopping session keeps reading, to answer the
// requests its peer sent before shutdown began.
const drainWindow = 100 * time.Millisecond

// errShuttingDown answers requests received but not started at shutdown.
var errShuttingDown = fault.New(fault.Unavailable, "server shutting down; the request was not started: retry on another connection")

// refuseQueued answers ERROR 503 to every whole frame the peer sent before
// the session stopped reading: received, never started. Frames larger
// than freeFrameBytes are not read for it.
func (s *session) refuseQueued(r io.Reader) {
	s.in.drainFor(drainWindow)
	for {
		var total int
		f, err := cxdbcompat.ReadFrameReserving(r, nil, func(n int) error {
			if total += n; total > freeFrameBytes {
				return errShuttingDown
			}
			return nil
		})
		if err != nil {
			return
		}
		s.answer(f, errorFrame(f.ReqID, errShuttingDown))
	}
}
