// Package connlimit guards a listener against clients that open too many
// connections: at most Max are open at once, a connection over the limit
// is refused at once (after a short refusal message) and counted, and
// Accept rides out temporary failures such as running out of file
// descriptors (EMFILE) with a backoff instead of returning them, as
// net/http does, so that a flood of connections never ends the server.
package connlimit

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options configure a Listener.
type Options struct {
	// Max is how many accepted connections may be open at once; 0 means
	// no limit.
	Max int
	// Refuse, if set, writes a short message to a connection over the
	// limit before it is closed (for example an HTTP 503 or a protocol
	// error frame). It runs in Accept with a write deadline of
	// RefuseTimeout, so it must be short.
	Refuse func(net.Conn)
}

// RefuseTimeout bounds the refusal write, so that a peer that does not
// read cannot stall Accept.
const RefuseTimeout = 100 * time.Millisecond

// Backoff of Accept after a temporary error, as net/http's Serve.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

// Listener is a net.Listener that enforces Options.
type Listener struct {
	net.Listener
	opts Options

	open         atomic.Int64
	refused      atomic.Uint64
	acceptErrors atomic.Uint64

	closeOnce sync.Once
	closed    chan struct{}
}

// New wraps ln.
func New(ln net.Listener, opts Options) *Listener {
	return &Listener{Listener: ln, opts: opts, closed: make(chan struct{})}
}

// Accept returns the next connection within the limit. Temporary errors
// are retried after a backoff; other errors (the listener closed) are
// returned.
func (l *Listener) Accept() (net.Conn, error) {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !temporary(err) {
				return nil, err
			}
			l.acceptErrors.Add(1)
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
			if !l.wait(backoff) {
				return nil, err
			}
			continue
		}
		backoff = 0
		if l.opts.Max > 0 && l.open.Load() >= int64(l.opts.Max) {
			l.refuse(c)
			continue
		}
		l.open.Add(1)
		return &conn{Conn: c, l: l}, nil
	}
}

// Close closes the listener and ends a backoff in progress.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// Open is the number of accepted connections not yet closed.
func (l *Listener) Open() int64 { return l.open.Load() }

// Refused is the number of connections refused over the limit.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// AcceptErrors is the number of temporary Accept failures ridden out.
func (l *Listener) AcceptErrors() uint64 { return l.acceptErrors.Load() }

// wait sleeps for d unless the listener closes first; it reports whether
// the listener is still open.
func (l *Listener) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.closed:
		return false
	}
}

func (l *Listener) refuse(c net.Conn) {
	l.refused.Add(1)
	if l.opts.Refuse != nil {
		_ = c.SetWriteDeadline(time.Now().Add(RefuseTimeout))
		l.opts.Refuse(c)
	}
	_ = c.Close()
}

// temporary reports an Accept error that a later Accept may not have:
// out of file descriptors or buffers, or a connection aborted before it
// was accepted.
func temporary(err error) bool {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EPROTO} {
		if errors.Is(err, errno) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// conn gives its slot back when it is closed, once.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

// Close closes the connection and frees its slot.
func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
