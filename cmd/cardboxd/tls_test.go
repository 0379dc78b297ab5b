package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/cxdbcompat/client"
	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testcert"
)

// startTLSServer runs cardboxd with a certificate from a throwaway CA and
// the given handshake timeout; its clients trust that CA alone.
func startTLSServer(t *testing.T, handshakeTimeout time.Duration) (*serverProc, *testcert.Set) {
	t.Helper()
	certs := testcert.New(t)
	p := newServer(t, t.TempDir(), pgtest.NewDB(t))
	p.env = append(p.env, "CARDBOX_TLS_CERT="+certs.CertFile(), "CARDBOX_TLS_KEY="+certs.KeyFile(),
		"CARDBOX_TLS_HANDSHAKE_TIMEOUT="+handshakeTimeout.String())
	p.clientTLS = certs.ClientConfig()
	p.start() // waits for /healthz over TLS
	return p, certs
}

// silentConn opens a TCP connection that never starts a TLS handshake and
// reports how its read ended: the server closing it, or the test's own
// deadline of a minute.
func silentConn(t *testing.T, addr string) <-chan error {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ended := make(chan error, 1)
	go func() {
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		_, err := c.Read(make([]byte, 1))
		ended <- err
	}()
	return ended
}

func TestTLSOnBothListeners(t *testing.T) {
	const handshakeTimeout = time.Second
	srv, certs := startTLSServer(t, handshakeTimeout)

	// Clients that connect and never handshake, on both listeners; they
	// are checked last, after the other clients were served meanwhile.
	began := time.Now()
	silentBin, silentHTTP := silentConn(t, srv.binAddr), silentConn(t, srv.httpAddr)

	resp, err := srv.httpClient().Get(srv.httpURL("/healthz"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 || resp.Proto != "HTTP/1.1" {
		t.Fatalf("GET /healthz over TLS: %d %q, %s, TLS %+v", resp.StatusCode, body, resp.Proto, resp.TLS)
	}

	// Plain HTTP on the TLS port is answered 400, never served.
	resp, err = http.Get("http://" + srv.httpAddr + "/healthz")
	if err != nil {
		t.Fatalf("plain HTTP on the TLS listener: %v, want a 400 answer", err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "https://") {
		t.Fatalf("plain HTTP on the TLS listener: %d %q, want 400 naming https", resp.StatusCode, body)
	}

	// TLS below 1.2 is refused on both listeners.
	old := certs.ClientConfig()
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	for _, addr := range []string{srv.binAddr, srv.httpAddr} {
		if c, err := tls.Dial("tcp", addr, old); err == nil {
			c.Close()
			t.Fatalf("%s: a TLS 1.1 client completed its handshake", addr)
		}
	}

	// The binary protocol over TLS, and not without it.
	c := srv.dial(t)
	ctx := context.Background()
	h, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendTurn(ctx, &client.AppendRequest{ContextID: h.ContextID, TypeID: "t", Payload: []byte("over tls")}); err != nil {
		t.Fatal(err)
	}
	if turns, err := c.GetLast(ctx, h.ContextID, 10, true); err != nil || len(turns) != 1 || string(turns[0].Payload) != "over tls" {
		t.Fatalf("GetLast over TLS: %+v, %v", turns, err)
	}
	plainCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if plain, err := client.Dial(plainCtx, srv.binAddr); err == nil {
		plain.Close()
		t.Fatal("a plain TCP client completed HELLO on the TLS binary listener")
	}

	for name, ended := range map[string]<-chan error{"binary": silentBin, "http": silentHTTP} {
		err := <-ended
		if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s: a connection that never handshakes: read ended with %v, want closed by the server", name, err)
		}
		if waited := time.Since(began); waited < handshakeTimeout {
			t.Errorf("%s: closed after %v, before the %v handshake timeout", name, waited, handshakeTimeout)
		}
	}
	if err := srv.stop(); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, srv.log)
	}
}

// One TLS file without the other is a start-up error that touches nothing.
func TestTLSSettingsComeInPairs(t *testing.T) {
	certs := testcert.New(t)
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"CARDBOX_TLS_CERT=" + certs.CertFile()}, "--tls-cert (CARDBOX_TLS_CERT) is set but --tls-key (CARDBOX_TLS_KEY) is not"},
		{[]string{"CARDBOX_TLS_KEY=" + certs.KeyFile()}, "--tls-key (CARDBOX_TLS_KEY) is set but --tls-cert (CARDBOX_TLS_CERT) is not"},
		{[]string{"CARDBOX_TLS_CERT=" + certs.CertFile(), "CARDBOX_TLS_KEY=" + certs.CAFile()}, "TLS certificate"},
	} {
		dataDir := filepath.Join(t.TempDir(), "data")
		env := append([]string{"CARDBOX_DATA_DIR=" + dataDir, "CARDBOX_DATABASE_URL=",
			"CARDBOX_BINARY_ADDR=" + freePort(t), "CARDBOX_HTTP_ADDR=" + freePort(t)}, tc.env...)
		out, err := runToExit(t, env...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("cardboxd with %v: %v, want an error containing %q:\n%s", tc.env, err, tc.want, out)
		}
		if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cardboxd with %v created its data directory before failing (stat: %v)", tc.env, err)
		}
	}
}
