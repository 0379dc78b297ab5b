package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/live"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
)

// session is one connection: a reader that decodes frames and hands each
// request to a handler (an idle one, else a new one, up to MaxInFlight);
// each handler writes its response as it finishes.
type session struct {
	srv  *Server
	conn net.Conn
	id   uint64

	ctx    context.Context // cancelled when the connection is gone (cause errClientClosed: the peer left)
	cancel context.CancelCauseFunc

	tenant    ident.Tenant // set at HELLO or at the first request
	hasTenant bool
	ident     atomic.Pointer[Identity] // set with tenant; read by CloseSessions
	refused   bool                     // authentication failed: end the session after answering
	counted   string                   // the tenant whose share counts this session; "" while unauthenticated
	live      *live.Session            // announced once the tenant is known; nil without Options.Live
	clientTag atomic.Pointer[string]   // from HELLO; recorded on the contexts the session creates
	extended  atomic.Bool              // HELLO asked for capabilities: answers may carry cardbox's extensions

	in       *pacedReader
	inflight chan struct{} // semaphore of running handlers
	large    chan struct{} // one payload-carrying request at a time
	stopping chan struct{} // closed when the server shuts down
	stopOnce sync.Once
	// reading ends when the session stops reading (shutdown) or the
	// connection is gone: a frame waiting for room in the request budget
	// waits no longer, as it is not reading the connection to see either.
	reading    context.Context
	endReading context.CancelFunc
	handlers   sync.WaitGroup
	work       chan request  // to an idle handler (unbuffered)
	idle       atomic.Int32  // handlers waiting on work
	readDone   chan struct{} // closed when no more requests will come

	out replies // responses being written
}

func newSession(srv *Server, conn net.Conn, id uint64) *session {
	ctx, cancel := context.WithCancelCause(context.Background())
	reading, endReading := context.WithCancel(ctx)
	s := &session{
		reading: reading, endReading: endReading,
		srv: srv, conn: conn, id: id, ctx: ctx, cancel: cancel,
		in:       &pacedReader{conn: conn, opts: &srv.opts},
		inflight: make(chan struct{}, srv.opts.MaxInFlight),
		large:    make(chan struct{}, 1),
		stopping: make(chan struct{}),
		work:     make(chan request),
		readDone: make(chan struct{}),
	}
	s.out.init()
	if srv.opts.Authenticate != nil {
		s.in.helloBy = time.Now().Add(srv.opts.HelloTimeout)
	}
	return s
}

// identity returns who the session acts as, once known.
func (s *session) identity() (Identity, bool) {
	if id := s.ident.Load(); id != nil {
		return *id, true
	}
	return Identity{}, false
}

// serve runs the session until the peer leaves, framing is lost or the
// server shuts down; in-flight requests are answered before it returns.
func (s *session) serve() {
	s.readLoop()
	close(s.readDone)
	s.handlers.Wait()
	s.cancel(nil)
	s.conn.Close()
	if s.live != nil {
		s.srv.opts.Live.Disconnect(s.id)
	}
}

// stopReading makes the blocked read return so the session winds down;
// requests waiting for a slot are answered 503.
func (s *session) stopReading() {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.endReading()
	s.in.stop()
}

func (s *session) readLoop() {
	r := bufio.NewReaderSize(s.in, readBufferSize)
	for {
		// Waiting for the next header consumes nothing: when shutdown
		// stops the read here, the stream is still at a frame boundary and
		// the frames already sent can be answered.
		if _, err := r.Peek(cxdbcompat.HeaderSize); err != nil {
			if s.in.stopped.Load() {
				s.refuseQueued(r)
				return
			}
			s.readFailed(err)
			return
		}
		charge := &frameCharge{s: s}
		f, err := cxdbcompat.ReadFrameReserving(r, nil, charge.reserve)
		if err != nil {
			charge.release()
			s.readFailed(err)
			return
		}
		s.in.frameDone()
		if !s.dispatch(f, charge) {
			charge.release()
			return
		}
	}
}

// readFailed answers an oversize frame before closing; other read errors
// (EOF, a cut frame, shutdown) just end the session. A peer that closed
// its connection abandons the requests it has in flight: they are
// cancelled, as net/http cancels a request whose client went away.
func (s *session) readFailed(err error) {
	var tooLarge *cxdbcompat.FrameTooLargeError
	if errors.As(err, &tooLarge) {
		s.reply(tooLarge.ReqID, errorFrame(tooLarge.ReqID, fault.New(fault.FrameTooLarge,
			"frame payload of %d bytes exceeds the %d-byte limit; closing the connection", tooLarge.Len, cxdbcompat.MaxPayload)))
		return
	}
	if peerLeft(err) {
		s.cancel(errClientClosed)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) {
		return
	}
	s.srv.log.Debug("binary session read", "session", s.id, "err", err)
}

// errClientClosed is the cause of a session's cancellation when its peer
// closed the connection (or reset it) rather than the server ending it.
var errClientClosed = errors.New("the client closed the connection")

// peerLeft reports whether a read or write error means the peer closed or
// reset the connection (not a deadline, nor the server closing it).
func peerLeft(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// clientGone reports whether the session ended because its peer left.
func (s *session) clientGone() bool { return context.Cause(s.ctx) == errClientClosed }

// abandoned records a request whose client went away before its answer:
// at debug, and in cardbox_binary_client_closed_total (not in
// cardbox_binary_requests_total: nobody takes the answer).
func (s *session) abandoned(f cxdbcompat.Frame) {
	// Logged before it is counted: whoever sees the count finds the line.
	s.srv.log.Debug("binary request abandoned: the client closed the connection", "type", f.Type, "session", s.id)
	s.srv.metrics.clientClosed.Inc()
}

// dispatch handles HELLO inline, since it decides the tenant every later
// request uses, and hands anything else to a handler, which releases
// the frame's charge when answered. It returns false when the session
// must end.
func (s *session) dispatch(f cxdbcompat.Frame, charge *frameCharge) bool {
	if f.Type == cxdbcompat.MsgHello {
		s.answer(f, s.hello(f))
		return !s.refused
	}
	if !s.hasTenant {
		if s.srv.opts.Authenticate != nil {
			// Nothing is served before authentication.
			s.answer(f, errorFrame(f.ReqID, errHelloFirst))
			return false
		}
		if err := s.useDefaultTenant(); err != nil {
			s.reply(f.ReqID, errorFrame(f.ReqID, err))
			return true
		}
	}
	if limit := s.srv.opts.Limit; limit != nil {
		if ok, wait := limit(s.ctx, s.tenant.ID); !ok {
			s.answer(f, errorFrame(f.ReqID, fault.New(fault.RateLimited,
				"the tenant's request rate limit is reached; retry in %d ms", max(1, wait.Milliseconds()))))
			s.pauseAfterRefusal(wait)
			return true
		}
	}
	if s.live != nil {
		s.live.Touch(time.Now())
	}
	select {
	case s.inflight <- struct{}{}:
	case <-s.stopping: // received, not started: the server is going away
		s.answer(f, errorFrame(f.ReqID, errShuttingDown))
		charge.release()
		return true
	case <-s.ctx.Done():
		if s.clientGone() {
			s.abandoned(f)
		}
		return false
	}
	r := request{f, charge}
	select {
	case s.work <- r: // an idle handler takes it
	default:
		s.handlers.Add(1)
		go s.handleLoop(r)
	}
	return true
}

// request is a frame waiting for a handler, with what it holds of the
// session's budgets.
type request struct {
	f      cxdbcompat.Frame
	charge *frameCharge
}

// maxIdleHandlers bounds the handlers a connection keeps waiting for
// work for as long as it lasts: enough for a client with a few requests in
// flight, few enough that a client that sent MaxInFlight requests at once
// does not leave that many goroutines behind on each of its connections.
// Handlers beyond it linger for defaultHandlerLinger before they end, so
// that a client that keeps many requests in flight on one connection (a
// pipelining SDK) reuses them too.
const (
	maxIdleHandlers      = 4
	defaultHandlerLinger = time.Second
)

// handleLoop serves r, then the requests dispatch hands it while it is
// idle, until reading ends, or until it has lingered idle for the
// server's linger while enough other handlers are idle. Handlers are kept
// rather than started per request: a fresh goroutine's stack grows (and is
// copied) on every append, which cost 4 % of the server's CPU with one
// request in flight per connection and 8 % with 64 pipelined on one
// (docs/performance.md).
func (s *session) handleLoop(r request) {
	defer s.handlers.Done()
	s.srv.metrics.handlersStarted.Add(1)
	s.srv.metrics.handlersRunning.Add(1)
	defer s.srv.metrics.handlersRunning.Add(-1)
	var linger *time.Timer
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	for {
		s.serveRequest(r)
		var expired <-chan time.Time // nil, never ready: a kept handler waits for good
		if s.idle.Add(1) > maxIdleHandlers {
			if linger == nil {
				linger = time.NewTimer(s.srv.opts.handlerLinger)
			} else {
				linger.Reset(s.srv.opts.handlerLinger)
			}
			expired = linger.C
		}
		select {
		case r = <-s.work:
			s.idle.Add(-1)
		case <-expired:
			s.idle.Add(-1)
			return
		case <-s.readDone:
			return
		}
	}
}

// serveRequest answers one request and frees its slot and charge.
func (s *session) serveRequest(r request) {
	defer func() { <-s.inflight; r.charge.release() }()
	f := r.f
	if err := s.chargeDeclared(f, r.charge); err != nil {
		s.answer(f, errorFrame(f.ReqID, err))
		return
	}
	if size, ok := s.turnListSize(f); ok && size > freeFrameBytes {
		s.serveCharged(f, size)
		return
	}
	if f.Type == cxdbcompat.MsgGetBlob {
		s.serveLarge(f)
		return
	}
	s.answer(f, s.handle(f))
}

// Bounds of the pause after a request refused for the tenant's rate.
const (
	minRefusedPause = 50 * time.Millisecond
	maxRefusedPause = time.Second
)

// pauseAfterRefusal stops reading the session's frames until its tenant
// may make a request again (within the bounds above): a client that
// ignores 429s then costs the server one refusal per pause, not one per
// frame it can send, and the tenants within their rates keep the CPU.
func (s *session) pauseAfterRefusal(wait time.Duration) {
	t := time.NewTimer(min(max(wait, minRefusedPause), maxRefusedPause))
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.stopping:
	case <-s.ctx.Done():
	}
}

// serveCharged answers a request whose answer will be about size bytes,
// charged to the reply budget before it is built (see limits.go).
func (s *session) serveCharged(f cxdbcompat.Frame, size int64) {
	if !s.takeLarge() {
		s.endedBefore(f)
		return
	}
	defer func() { <-s.large }()
	release, err := s.chargeReply(s.ctx, size)
	if err != nil {
		s.endedBefore(f)
		return
	}
	defer release()
	s.answer(f, s.handle(f))
}

// endedBefore records a request the session ended before it was answered:
// abandoned when the client left.
func (s *session) endedBefore(f cxdbcompat.Frame) {
	if s.clientGone() {
		s.abandoned(f)
	}
}

// takeLarge waits for the session's one slot for a large answer; false
// when the session ends first.
func (s *session) takeLarge() bool {
	select {
	case s.large <- struct{}{}:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// serveLarge answers a GET_BLOB within the response limits (see
// limits.go).
func (s *session) serveLarge(f cxdbcompat.Frame) {
	if !s.takeLarge() {
		s.endedBefore(f)
		return
	}
	defer func() { <-s.large }()
	tenant := s.tenant.ID
	resp, charged, err := s.buildLarge(s.ctx, tenant, func() []byte { return s.handle(f) })
	if err != nil {
		s.endedBefore(f)
		return
	}
	s.answer(f, resp)
	if charged > 0 {
		s.srv.replies.release(tenant, charged)
		s.srv.metrics.replyBytes.Add(-charged)
	}
}

// answer counts the answer to f and writes it: counted first, so that a
// client that read its answer finds it counted. A nil answer is a request
// abandoned because its client went away (see handle), and so is any
// answer once the client is known to have left; that one is still
// written, for a peer that only closed its sending half.
func (s *session) answer(f cxdbcompat.Frame, resp []byte) {
	if resp == nil || s.clientGone() {
		s.abandoned(f)
		if resp != nil {
			s.reply(f.ReqID, resp)
		}
		return
	}
	s.srv.metrics.answered(f.Type, resp)
	s.reply(f.ReqID, resp)
}

func (s *session) hello(f cxdbcompat.Frame) []byte {
	req, err := cxdbcompat.DecodeHelloRequest(f.Payload)
	if err != nil {
		s.refused = s.srv.opts.Authenticate != nil && !s.hasTenant
		return errorFrame(f.ReqID, err)
	}
	if strings.IndexByte(req.ClientTag, 0) >= 0 {
		s.refused = s.srv.opts.Authenticate != nil && !s.hasTenant
		return errorFrame(f.ReqID, fault.New(fault.Invalid, "client_tag contains a NUL byte"))
	}
	cred := ParseCredential(req)
	s.clientTag.Store(&cred.ClientTag)
	if !s.hasTenant {
		if err := s.authenticate(cred); err != nil {
			return errorFrame(f.ReqID, err)
		}
	}
	resp := cxdbcompat.HelloResponse{SessionID: s.id, ProtocolVersion: 1}
	if req.WantsCapabilities() {
		resp.Capabilities = cxdbcompat.CapConditionalAppend | cxdbcompat.CapAppendParent
		s.extended.Store(true)
	}
	return frame(cxdbcompat.MsgHello, f.ReqID, resp.AppendTo)
}

// errHelloFirst refuses a request sent before authenticating.
var errHelloFirst = fault.New(fault.Unauthorized, "send HELLO with an API key first (client tag \"<name>;key=<secret>\" or metadata {\"api_key\": ...}); closing the connection")

// authenticate fixes the session's identity from its HELLO's credential;
// a refusal ends the session once answered.
func (s *session) authenticate(cred Credential) error {
	if s.srv.opts.Authenticate == nil {
		return s.useDefaultTenant()
	}
	grant, err := s.srv.opts.Authenticate(s.ctx, cred)
	if err != nil {
		if k := fault.KindOf(err); errors.As(err, new(*fault.Error)) && (k == fault.Unavailable || k == fault.DiskFull || k == fault.Internal) {
			return err // the authenticator could not decide: 503 / 507 / 500
		}
		s.refused = true
		if errors.Is(err, auth.ErrForbidden) {
			return fault.New(fault.Forbidden, "%s; closing the connection", err)
		}
		return fault.New(fault.Unauthorized, "%s; closing the connection", err)
	}
	// The grant names the tenant; the store resolves it, once: its
	// writers know only tenants it resolved.
	t, err := s.srv.opts.Store.Tenant(s.ctx, grant.TenantID)
	if fault.KindOf(err) == fault.NotFound {
		s.refused = true
		return fault.New(fault.Unauthorized, "the key's tenant %q does not exist; closing the connection", grant.TenantID)
	}
	if err != nil {
		return err
	}
	if !s.srv.admit(s, t.ID) {
		s.refused = true
		return errTenantSessions
	}
	id := Identity{Tenant: t, ClientTag: cred.ClientTag, KeyID: grant.KeyID, ReadOnly: grant.ReadOnly}
	s.in.helloBy = time.Time{}
	s.setIdentity(id)
	return nil
}

func (s *session) useDefaultTenant() error {
	t, err := s.srv.opts.Store.Tenant(s.ctx, ident.DefaultTenantID)
	if err != nil {
		return err
	}
	s.setIdentity(Identity{Tenant: t, ClientTag: s.tag()})
	return nil
}

// setIdentity fixes the session's identity and announces the session as
// connected; the reader calls it before starting any handler, so they all
// see s.ctx with the session in it.
func (s *session) setIdentity(id Identity) {
	s.tenant, s.hasTenant = id.Tenant, true
	s.ident.Store(&id)
	hub := s.srv.opts.Live
	if hub == nil {
		return
	}
	s.live = &live.Session{
		ID: s.id, Tenant: id.Tenant.ID, ClientTag: s.tag(), PeerAddr: s.conn.RemoteAddr().String(), ConnectedAt: time.Now(),
	}
	s.ctx = live.WithSession(s.ctx, s.live)
	hub.Connect(s.live)
}

// tag is the client tag the session sent at HELLO, "" without one.
func (s *session) tag() string {
	if t := s.clientTag.Load(); t != nil {
		return *t
	}
	return ""
}
