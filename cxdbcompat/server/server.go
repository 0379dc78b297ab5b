// Package server serves the CXDB binary protocol over TCP on a
// store.TurnStore, byte-compatible with the official CXDB clients.
//
// Each connection is a session that belongs to one tenant, decided at HELLO
// (Options.Authenticate; without it, the default tenant). Requests on one
// connection may be in flight together: each runs in its own goroutine (at
// most Options.MaxInFlight per connection) and its response carries its
// req_id, so pipelined responses may come back in any order. Every
// request-level error is an ERROR frame and the connection stays open; only
// a frame the server cannot delimit (over 64 MiB, or cut short) closes it.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/cardboxhq/cardbox/cxdbcompat"
	"github.com/cardboxhq/cardbox/cxdbcompat/live"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/fault"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/lograte"
	"github.com/cardboxhq/cardbox/store"
)

// Identity is who a session acts as, decided at HELLO.
type Identity struct {
	// Tenant is the store's tenant (the session resolves the grant's).
	Tenant ident.Tenant
	// ClientTag is the tag to record and publish for the session: the
	// HELLO's, without any secret it carried.
	ClientTag string
	// KeyID names the credential, so that CloseSessions can find the
	// sessions of a revoked key; "" without one.
	KeyID string
	// ReadOnly answers every write message with ERROR 403.
	ReadOnly bool
}

// Credential is what a HELLO offers to authenticate with, read from it
// once by the session (ParseCredential).
type Credential struct {
	// ClientTag is the HELLO's client tag without the secret it may
	// carry: what the session records and publishes.
	ClientTag string
	// Secret is the API key: the client metadata's {"api_key": ...},
	// else the one the tag carries ("<name>;key=<secret>" or the secret
	// alone, for the official clients, which send no metadata); "" when
	// the HELLO has none.
	Secret string
}

// ParseCredential reads a HELLO's credential. A tag never keeps a secret,
// authenticated or not: it is stored on contexts, logged and published.
func ParseCredential(hello cxdbcompat.HelloRequest) Credential {
	tag, secret := auth.SplitClientTag(hello.ClientTag)
	if len(hello.ClientMetaJSON) > 0 {
		var meta struct {
			APIKey string `json:"api_key"`
		}
		if json.Unmarshal(hello.ClientMetaJSON, &meta) == nil && meta.APIKey != "" {
			secret = meta.APIKey
		}
	}
	return Credential{ClientTag: tag, Secret: secret}
}

// Grant is what an Authenticator decides: whose session it is (the
// tenant, by id: the session resolves it through the store, once) and
// what it may do.
type Grant struct {
	TenantID string
	// KeyID names the credential ("" without one); see Identity.
	KeyID string
	// ReadOnly answers every write message with ERROR 403.
	ReadOnly bool
}

// Authenticator decides a session's grant from its HELLO's credential. An
// error refuses the HELLO with ERROR 401 and closes the connection, except
// a *fault.Error of kind UNAVAILABLE or INTERNAL, which is answered with
// its own code (503, 500) and leaves the session open to try again.
type Authenticator func(ctx context.Context, cred Credential) (Grant, error)

// Options configure a Server.
type Options struct {
	Store store.TurnStore
	// Live, if set, is told of sessions connecting and leaving, and the
	// session is in the context of every store call it makes (so the
	// contexts it creates are known to be its own).
	Live *live.Hub
	// Authenticate picks the identity at HELLO, which must then be the
	// first message and arrive within HelloTimeout; nil means every session
	// uses the default tenant (no authentication), HELLO or not.
	Authenticate Authenticator
	// Limit, if set, is asked before each request of a session (HELLO
	// aside) whether its tenant may make one now; a refusal is ERROR 429
	// saying how long to wait (ratelimit.Limiter.Allow).
	Limit func(ctx context.Context, tenant string) (bool, time.Duration)
	// MaxUnauthenticated caps the connections that have not authenticated
	// yet when Authenticate is set (default 64): one more is answered
	// ERROR 503 and closed, so clients without keys cannot take the
	// connection budget from those with keys.
	MaxUnauthenticated int
	// MaxSessionsPerTenant caps one tenant's authenticated sessions (0: no
	// cap): the HELLO of one more is answered ERROR 503 and the connection
	// closed, so one tenant cannot take every connection.
	MaxSessionsPerTenant int
	// HelloTimeout is how long a connection may take to authenticate
	// (default 10 s) when Authenticate is set.
	HelloTimeout time.Duration
	// MaxInFlight caps concurrent requests per connection (default 64).
	MaxInFlight int
	// MaxInFlightBytes caps the request payload bytes held by frames
	// arriving and requests in progress, across all connections (default
	// 64 MiB, at least one whole frame); a reader waits for room before
	// taking on more, so many large frames cannot exhaust memory.
	MaxInFlightBytes int64
	// MaxReplyBytes caps the bytes of large responses built and not yet
	// written, across all connections (default 64 MiB, at least one whole
	// frame).
	MaxReplyBytes int64
	// TenantShare is the fraction of MaxInFlightBytes and of
	// MaxReplyBytes one tenant may hold, so that one tenant cannot spend a
	// budget all others share; 0 gives no shares. Sessions yet to
	// authenticate count as one tenant. Each budget is raised, if need
	// be, so that a share holds one whole frame (at 0.25: 256 MiB).
	TenantShare float64
	// IdleTimeout closes a session that sends no frame for so long
	// (default 5 minutes).
	IdleTimeout time.Duration
	// FrameTimeout is the longest pause inside a frame; after the first
	// FrameTimeout, a frame must also arrive at MinFrameRate bytes per
	// second on average (defaults 10 s, 64 KiB/s). A slower frame ends
	// the session.
	FrameTimeout time.Duration
	MinFrameRate int64
	// WriteTimeout is how long a peer has to take a response, plus its
	// size at MinWriteRate bytes per second (defaults 30 s, 1 MiB/s); a
	// peer that does not read is disconnected.
	WriteTimeout time.Duration
	MinWriteRate int64
	Logger       *slog.Logger
	// ErrorLogInterval is how long failed requests of one code and kind
	// are counted, after one is logged, before their count is logged
	// (lograte.DefaultInterval, 5 s, when zero).
	ErrorLogInterval time.Duration

	// handlerLinger is how long a connection's handlers beyond
	// maxIdleHandlers wait for work before they end (a second unless a
	// test sets it).
	handlerLinger time.Duration
}

// Server accepts binary-protocol connections.
type Server struct {
	opts    Options
	log     *slog.Logger
	bytes   *budget             // payload bytes of requests arriving or in progress
	replies *budget             // bytes of large responses not yet written
	builds  *semaphore.Weighted // payload-carrying responses being built
	metrics *metrics
	// errLog logs failed requests, once per kind and interval.
	errLog *lograte.Limiter

	unauthenticated atomic.Int64 // sessions yet to authenticate (with Authenticate)

	mu        sync.Mutex
	closing   bool
	conns     map[*session]struct{}
	perTenant map[string]int // authenticated sessions by tenant (with Authenticate)
	listener  []net.Listener
	wg        sync.WaitGroup // live sessions
}

// New returns a Server; call Serve to accept connections.
func New(opts Options) *Server {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 64
	}
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = 10 * time.Second
	}
	if opts.MaxUnauthenticated <= 0 {
		opts.MaxUnauthenticated = 64
	}
	opts = withLimitDefaults(opts)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{
		opts: opts, log: opts.Logger, conns: map[*session]struct{}{}, perTenant: map[string]int{},
		bytes:   newBudget(opts.MaxInFlightBytes, opts.TenantShare, cxdbcompat.MaxPayload),
		replies: newBudget(opts.MaxReplyBytes, opts.TenantShare, cxdbcompat.MaxPayload+cxdbcompat.HeaderSize+1),
		builds:  semaphore.NewWeighted(maxBuilds),
		metrics: newMetrics(),
		errLog:  lograte.New(opts.Logger, lograte.Options{Interval: opts.ErrorLogInterval}),
	}
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("cxdb server closed")

// Serve accepts connections on ln until Shutdown, serving each in its own
// goroutine.
func (s *Server) Serve(ln net.Listener) error {
	if !s.track(ln) {
		ln.Close()
		return ErrServerClosed
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		s.startSession(conn)
	}
}

func (s *Server) track(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.listener = append(s.listener, ln)
	return true
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *Server) startSession(conn net.Conn) {
	if s.opts.Authenticate != nil && s.unauthenticated.Add(1) > int64(s.opts.MaxUnauthenticated) {
		s.unauthenticated.Add(-1)
		_, _ = conn.Write(errorFrame(0, errTooManyUnauthenticated))
		conn.Close()
		return
	}
	sess := newSession(s, conn, newSessionID())
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.conns[sess] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		sess.serve()
		s.mu.Lock()
		delete(s.conns, sess)
		s.mu.Unlock()
		s.release(sess)
	}()
}

var (
	errTooManyUnauthenticated = fault.New(fault.TooManyConnections, "too many connections have not authenticated yet; retry later")
	errTenantSessions         = fault.New(fault.TooManyConnections, "the tenant has as many sessions open as it may; close one or retry later")
)

// admit counts a session that authenticated as tenant against the
// tenant's share, and no more against the unauthenticated ones; false
// when the tenant's share is used up.
func (s *Server) admit(sess *session, tenant string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if max := s.opts.MaxSessionsPerTenant; max > 0 && s.perTenant[tenant] >= max {
		return false
	}
	s.perTenant[tenant]++
	sess.counted = tenant
	s.unauthenticated.Add(-1)
	return true
}

// release uncounts an ended session.
func (s *Server) release(sess *session) {
	if s.opts.Authenticate == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.counted == "" {
		s.unauthenticated.Add(-1)
		return
	}
	if s.perTenant[sess.counted]--; s.perTenant[sess.counted] == 0 {
		delete(s.perTenant, sess.counted)
	}
}

// CloseSessions closes, at once, the authenticated sessions whose
// identity match accepts (a revoked key's); their requests in progress are
// cancelled. It returns how many it closed.
func (s *Server) CloseSessions(match func(Identity) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for sess := range s.conns {
		if id, ok := sess.identity(); ok && match(id) {
			sess.cancel(nil)
			sess.conn.Close()
			n++
		}
	}
	return n
}

// Identities returns the identities of the authenticated sessions, for
// re-checking their credentials.
func (s *Server) Identities() []Identity {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Identity
	for sess := range s.conns {
		if id, ok := sess.identity(); ok {
			out = append(out, id)
		}
	}
	return out
}

// Shutdown stops accepting, stops reading new requests, lets in-flight
// requests finish and their responses go out, then closes the connections.
// If ctx ends first, the connections are closed at once and the requests
// still running are cancelled (a store call stuck on Postgres must not
// hold Shutdown past its deadline).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for _, ln := range s.listener {
		ln.Close()
	}
	for sess := range s.conns {
		sess.stopReading()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	defer s.errLog.Stop() // the counts of failures not logged yet
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for sess := range s.conns {
			sess.cancel(nil)
			sess.conn.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// newSessionID returns a session id no one can predict: a tenant sees
// its sessions' ids (HELLO, events), and ids counted up for all tenants
// would tell it how many sessions the others open. Collisions among 64
// random bits are left to chance.
func newSessionID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}
