// Package tlslisten serves TLS on a listener without letting a client that
// never completes the handshake hold anything for long, or hold up others.
//
// crypto/tls's own listener (tls.NewListener) hands out connections whose
// handshake has not happened yet: whoever reads first runs it, under
// whatever deadline that reader happens to set (net/http its header
// timeout, the binary server its idle timeout of minutes). Here every
// handshake runs in a goroutine of its own under Options.HandshakeTimeout,
// and Accept returns only connections whose handshake is complete. So a
// client that opens TCP and sends nothing holds its connection, its
// goroutine and its slot in a connlimit.Listener beneath for at most the
// timeout, and a slow handshake never delays accepting the next client.
//
// The servers above are unchanged: they receive *tls.Conn values
// (net/http then fills in Request.TLS and skips its own handshake).
package tlslisten

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// DefaultHandshakeTimeout is the HandshakeTimeout when Options leave it 0.
const DefaultHandshakeTimeout = 10 * time.Second

// Options configure a Listener.
type Options struct {
	// Config is the server's TLS configuration (certificates, versions,
	// ALPN protocols).
	Config *tls.Config
	// HandshakeTimeout bounds each handshake, from the moment the
	// connection is accepted (default DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// Plaintext, if set, answers a client whose first bytes are not a TLS
	// record (one speaking the plain protocol to a TLS port) before its
	// connection is closed. It runs under the handshake deadline.
	Plaintext func(net.Conn)
	// Logger receives failed handshakes at debug level, as net/http logs
	// them: they are the client's problem, not the server's.
	Logger *slog.Logger
}

// Listener is a net.Listener whose Accept returns *tls.Conn values with a
// completed handshake.
type Listener struct {
	inner net.Listener
	opts  Options
	log   *slog.Logger

	ready     chan *tls.Conn // handshaken connections waiting for Accept
	failed    chan struct{}  // closed when the inner Accept failed, with acceptErr set
	acceptErr error
	done      chan struct{} // closed by Close
	closeOnce sync.Once

	mu      sync.Mutex
	closed  bool
	pending map[net.Conn]struct{} // raw connections in their handshake
}

// New wraps inner and starts accepting from it. An error from inner's
// Accept ends the listener: wrap one that rides out temporary errors
// itself, such as a connlimit.Listener.
func New(inner net.Listener, opts Options) *Listener {
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = DefaultHandshakeTimeout
	}
	l := &Listener{
		inner: inner, opts: opts, log: opts.Logger,
		ready: make(chan *tls.Conn), failed: make(chan struct{}), done: make(chan struct{}),
		pending: map[net.Conn]struct{}{},
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	go l.acceptLoop()
	return l
}

// Accept returns the next connection whose handshake has completed.
func (l *Listener) Accept() (net.Conn, error) {
	// A closed listener hands out nothing more, even if a handshake has
	// just finished.
	select {
	case <-l.done:
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.failed:
		return nil, l.acceptErr
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the inner listener and the connections still in their
// handshake; connections already returned by Accept are their server's.
func (l *Listener) Close() error {
	err := l.inner.Close()
	l.closeOnce.Do(func() {
		close(l.done)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.closed = true
		for c := range l.pending {
			_ = c.Close()
		}
	})
	return err
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

func (l *Listener) acceptLoop() {
	for {
		c, err := l.inner.Accept()
		if err != nil {
			l.acceptErr = err
			close(l.failed)
			return
		}
		if !l.track(c) {
			_ = c.Close()
			continue // the inner listener is closed too: Accept fails next
		}
		go l.handshake(c)
	}
}

// track records a connection entering its handshake, unless the listener
// is closed.
func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.pending[c] = struct{}{}
	return true
}

func (l *Listener) untrack(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, c)
}

// handshake runs raw's handshake under the deadline and hands the
// connection to Accept, or closes it.
func (l *Listener) handshake(raw net.Conn) {
	c := tls.Server(raw, l.opts.Config)
	_ = raw.SetDeadline(time.Now().Add(l.opts.HandshakeTimeout))
	err := c.Handshake()
	l.untrack(raw)
	if err != nil {
		var plain tls.RecordHeaderError
		if errors.As(err, &plain) && plain.Conn != nil && l.opts.Plaintext != nil {
			l.opts.Plaintext(plain.Conn)
		}
		l.log.Debug("tls handshake failed", "peer", raw.RemoteAddr().String(), "err", err)
		_ = raw.Close()
		return
	}
	// The deadline was the handshake's; the server sets its own from here.
	_ = raw.SetDeadline(time.Time{})
	select {
	case l.ready <- c:
	case <-l.done:
		_ = c.Close()
	}
}
