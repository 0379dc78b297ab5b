package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/testbin"
)

// healthServer is a real HTTP server whose /healthz answers status.
func healthServer(t *testing.T, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(healthHandler(status))
	t.Cleanup(srv.Close)
	return srv
}

func healthHandler(status int) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		w.Write([]byte(`{"status":"whatever"}`))
	})
	return mux
}

// checkHealth runs `cardbox health` in-process with args.
func checkHealth(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = runHealth(context.Background(), args, &out, &errOut)
	return out.String(), err
}

func TestHealthOKOn200(t *testing.T) {
	srv := healthServer(t, http.StatusOK)
	out, err := checkHealth(t, "--http-addr", srv.Listener.Addr().String())
	if err != nil {
		t.Fatalf("health of a server answering 200: %v", err)
	}
	if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "ok: http://"+srv.Listener.Addr().String()+"/healthz") {
		t.Fatalf("output %q, want one line saying ok", out)
	}
}

func TestHealthFailsOnAnythingElse(t *testing.T) {
	srv := healthServer(t, http.StatusServiceUnavailable)
	out, err := checkHealth(t, "--http-addr", srv.Listener.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "503") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("health of a server answering 503: %v, want one line naming the 503", err)
	}
	if out != "" {
		t.Fatalf("stdout %q on failure", out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if _, err := checkHealth(t, "--http-addr", closed); err == nil {
		t.Fatalf("health with nothing listening on %s succeeded", closed)
	}
}

// The image listens on 0.0.0.0:9010 and its health check reads that same
// CARDBOX_HTTP_ADDR: the check asks the loopback address.
func TestHealthOfAWildcardAddressAsksLoopback(t *testing.T) {
	srv := healthServer(t, http.StatusOK)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CARDBOX_HTTP_ADDR", "0.0.0.0:"+port)
	out, err := checkHealth(t)
	if err != nil {
		t.Fatalf("health from CARDBOX_HTTP_ADDR=0.0.0.0:%s: %v", port, err)
	}
	if !strings.Contains(out, "http://127.0.0.1:"+port+"/healthz") {
		t.Fatalf("output %q, want the loopback URL", out)
	}
	if _, err := checkHealth(t, "--http-addr", ":"+port); err != nil {
		t.Fatalf("health of :%s: %v", port, err)
	}
}

// With --tls-cert the check speaks TLS and accepts exactly that
// certificate, whatever names it holds.
func TestHealthOverTLSAcceptsTheServersCertificateOnly(t *testing.T) {
	srv := httptest.NewTLSServer(healthHandler(http.StatusOK))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	own := filepath.Join(dir, "cert.pem")
	writePEM(t, own, srv.Certificate().Raw)
	out, err := checkHealth(t, "--http-addr", srv.Listener.Addr().String(), "--tls-cert", own)
	if err != nil || !strings.HasPrefix(out, "ok: https://") {
		t.Fatalf("health over TLS with the server's certificate: %q, %v", out, err)
	}

	otherCert := filepath.Join(dir, "other.pem")
	writePEM(t, otherCert, selfSigned(t))
	if _, err := checkHealth(t, "--http-addr", srv.Listener.Addr().String(), "--tls-cert", otherCert); err == nil ||
		!strings.Contains(err.Error(), "did not present the certificate of --tls-cert") {
		t.Fatalf("health over TLS with another certificate: %v, want a refusal", err)
	}
	if _, err := checkHealth(t, "--http-addr", srv.Listener.Addr().String()); err == nil {
		t.Fatal("plain HTTP to a TLS listener succeeded")
	}
}

// selfSigned is a certificate for 127.0.0.1 that no test server uses.
func selfSigned(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the server"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t *testing.T, path string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The command's exit status, as a container runtime sees it: 0 and one
// line on stdout for a 200, 1 and one line on stderr otherwise.
func TestHealthExitStatus(t *testing.T) {
	bin := testbin.Command(t, "./cmd/cardbox")
	for _, tc := range []struct {
		status int
		exit   int
	}{{http.StatusOK, 0}, {http.StatusServiceUnavailable, 1}, {http.StatusNotFound, 1}} {
		srv := healthServer(t, tc.status)
		cmd := exec.Command(bin, "health", "--http-addr", srv.Listener.Addr().String())
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		exit := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			exit = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		lines := stdout.String() + stderr.String()
		if exit != tc.exit || strings.Count(lines, "\n") != 1 {
			t.Errorf("answer %d: exit %d, output %q; want exit %d and one line", tc.status, exit, lines, tc.exit)
		}
	}
}

// With --wait, health asks again while the server is not ready (here it
// answers 503 twice, as a starting server may) and succeeds on its 200;
// a server that never answers 200 fails it once the wait is over.
func TestHealthWaitsForAStartingServer(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if asked.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	out, err := checkHealth(t, "--http-addr", srv.Listener.Addr().String(), "--wait", "1m")
	if err != nil || !strings.HasPrefix(out, "ok: ") || asked.Load() != 3 {
		t.Fatalf("health --wait of a server answering 503, 503, 200: %v, %q after %d questions", err, out, asked.Load())
	}

	down := healthServer(t, http.StatusServiceUnavailable)
	if _, err := checkHealth(t, "--http-addr", down.Listener.Addr().String(), "--wait", "300ms"); err == nil ||
		!strings.Contains(err.Error(), "503") {
		t.Fatalf("health --wait of a server that answers 503 only: %v, want its 503", err)
	}
}
