package pgtest

import (
	"errors"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
)

// Proxy stands between a test's client and the test Postgres server, so
// that the test can cut the connection as a network failure or a dead
// server would: Cut closes every connection and refuses new ones until
// Restore. The server itself stays up for the other tests.
type Proxy struct {
	ln            net.Listener
	network, addr string // of the real server
	mu            sync.Mutex
	conns         map[net.Conn]struct{}
	down          bool
	wg            sync.WaitGroup
}

// NewProxy starts a proxy to the server of dbURL (a URL from NewDB) and
// returns it with the URL that goes through it. It stops when t ends.
func NewProxy(t testing.TB, dbURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{conns: map[net.Conn]struct{}{}}
	q := u.Query()
	if host := q.Get("host"); len(host) > 0 && host[0] == '/' {
		port := q.Get("port")
		if port == "" {
			port = "5432"
		}
		p.network, p.addr = "unix", host+"/.s.PGSQL."+port
	} else {
		p.network, p.addr = "tcp", u.Host
	}
	if p.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	q.Del("host")
	q.Del("port")
	u.Host = "127.0.0.1:" + strconv.Itoa(p.ln.Addr().(*net.TCPAddr).Port)
	u.RawQuery = q.Encode()
	return p, u.String()
}

// Cut closes every proxied connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		p.wg.Go(func() { p.pipe(c) })
	}
}

// pipe copies both ways between c and a new connection to the server.
func (p *Proxy) pipe(c net.Conn) {
	s, err := net.Dial(p.network, p.addr)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, s) {
		return
	}
	defer p.untrack(c, s)
	done := make(chan struct{}, 2)
	copyTo := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go copyTo(s, c)
	go copyTo(c, s)
	<-done
	<-done
}

func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}

func (p *Proxy) close() {
	p.Cut()
	if err := p.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return
	}
	p.wg.Wait()
}
