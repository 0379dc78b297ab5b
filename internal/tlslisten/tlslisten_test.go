package tlslisten_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/testcert"
	"github.com/cardboxhq/cardbox/internal/tlslisten"
)

// server is a tlslisten.Listener with an echo server on it.
type server struct {
	l        *tlslisten.Listener
	certs    *testcert.Set
	accepted chan net.Conn // every connection Accept returned
}

// start serves lines back on a TLS listener with opts (Config filled in
// from a fresh test CA).
func start(t *testing.T, opts tlslisten.Options) *server {
	t.Helper()
	certs := testcert.New(t)
	cfg, err := certs.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	opts.Config = cfg
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{l: tlslisten.New(raw, opts), certs: certs, accepted: make(chan net.Conn, 16)}
	done := make(chan error, 1)
	go func() {
		for {
			c, err := s.l.Accept()
			if err != nil {
				done <- err
				return
			}
			s.accepted <- c
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		s.l.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept ended with %v, want net.ErrClosed", err)
		}
	})
	return s
}

// dialTLS connects with the test CA and echoes a line.
func (s *server) dialTLS(t *testing.T) {
	t.Helper()
	c, err := tls.Dial("tcp", s.l.Addr().String(), s.certs.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintln(c, "hello"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "hello\n" {
		t.Fatalf("echo over TLS = %q, %v", line, err)
	}
}

// dialRaw opens a plain TCP connection that the test closes.
func (s *server) dialRaw(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether err is the server closing the connection
// (rather than the client's own read deadline).
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

func TestAcceptReturnsHandshakenConnections(t *testing.T) {
	s := start(t, tlslisten.Options{})
	s.dialTLS(t)
	c := <-s.accepted
	tc, ok := c.(*tls.Conn)
	if !ok {
		t.Fatalf("Accept returned a %T, want *tls.Conn", c)
	}
	if st := tc.ConnectionState(); !st.HandshakeComplete || st.Version < tls.VersionTLS12 {
		t.Fatalf("accepted connection state: complete %v, version %x", st.HandshakeComplete, st.Version)
	}
}

// A client that connects and never starts its handshake neither holds up
// the clients behind it nor keeps its connection past the timeout.
func TestSilentClientIsClosedAfterTheTimeoutWithoutBlockingOthers(t *testing.T) {
	const timeout = 2 * time.Second
	s := start(t, tlslisten.Options{HandshakeTimeout: timeout})
	began := time.Now()
	silent := s.dialRaw(t)
	closed := make(chan error, 1)
	go func() {
		_ = silent.SetReadDeadline(time.Now().Add(time.Minute))
		_, err := silent.Read(make([]byte, 1))
		closed <- err
	}()

	s.dialTLS(t) // accepted while the silent one still waits
	select {
	case err := <-closed:
		t.Fatalf("the silent connection ended (%v) before a later client was served: Accept waited for its handshake", err)
	default:
	}
	err := <-closed
	if !closedByPeer(err) {
		t.Fatalf("silent connection read: %v, want closed by the server", err)
	}
	if waited := time.Since(began); waited < timeout {
		t.Fatalf("silent connection closed after %v, before the %v timeout", waited, timeout)
	}
}

func TestPlaintextClientIsAnswered(t *testing.T) {
	s := start(t, tlslisten.Options{Plaintext: func(c net.Conn) { _, _ = io.WriteString(c, "speak TLS\n") }})
	c := s.dialRaw(t)
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	if string(got) != "speak TLS\n" {
		t.Fatalf("plaintext client got %q", got)
	}
}

func TestOldTLSVersionsAreRefused(t *testing.T) {
	s := start(t, tlslisten.Options{})
	cfg := s.certs.ClientConfig()
	cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if c, err := tls.Dial("tcp", s.l.Addr().String(), cfg); err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 client completed its handshake")
	}
	s.dialTLS(t)
}

func TestCloseEndsHandshakesInProgress(t *testing.T) {
	s := start(t, tlslisten.Options{HandshakeTimeout: time.Hour})
	// Whether Close finds it in its handshake, accepted but not yet
	// tracked, or still in the kernel's backlog, the client must see its
	// connection closed.
	silent := s.dialRaw(t)
	if err := s.l.Close(); err != nil {
		t.Fatal(err)
	}
	_ = silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); !closedByPeer(err) {
		t.Fatalf("read after Close: %v, want closed by the server", err)
	}
	if _, err := s.l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}

// The server's certificate files are readable PEM (what cardboxd loads).
func TestTestCertFiles(t *testing.T) {
	certs := testcert.New(t)
	if _, err := tls.LoadX509KeyPair(certs.CertFile(), certs.KeyFile()); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(certs.CAFile())
	if err != nil || !strings.Contains(string(ca), "BEGIN CERTIFICATE") {
		t.Fatalf("CA file: %v", err)
	}
}
