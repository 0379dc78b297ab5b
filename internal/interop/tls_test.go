package interop

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cxdb "github.com/strongdm/ai-cxdb/clients/go"
)

// testCerts is a throwaway CA and a server certificate it signed for
// 127.0.0.1 and localhost, as PEM files. (The main module's
// internal/testcert does the same; this module cannot import it.)
type testCerts struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
}

func newTestCerts(t *testing.T) *testCerts {
	t.Helper()
	now, dir := time.Now(), t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cardbox interop CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCerts{
		caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem"),
		pool: x509.NewCertPool(),
	}
	c.pool.AddCert(ca)
	for path, block := range map[string]*pem.Block{
		c.caFile: {Type: "CERTIFICATE", Bytes: caDER}, c.certFile: {Type: "CERTIFICATE", Bytes: leafDER}, c.keyFile: {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// tlsChildAddr, in the environment, makes TestOfficialGoClientOverTLSChild
// run: it names the TLS binary listener to use.
const tlsChildAddr = "CARDBOX_INTEROP_TLS_ADDR"

// TestOfficialGoClientOverTLS runs the official client's DialTLS against
// cardboxd serving a certificate from a throwaway CA. The client verifies
// against the system roots (tls.Config{}), which Go loads once per
// process, so the part that trusts the CA runs in a child process of this
// test binary started with SSL_CERT_FILE: exactly how a deployment with a
// private CA runs it (docs/security.md, TLS).
func TestOfficialGoClientOverTLS(t *testing.T) {
	if os.Getenv(tlsChildAddr) != "" {
		t.Skip("the child process runs only TestOfficialGoClientOverTLSChild")
	}
	certs := newTestCerts(t)
	s := startServer(t, certs) // healthy over https with the CA

	// Without the CA the official client refuses the server, and a plain
	// connection gets no session: the TLS port speaks only TLS.
	if c, err := cxdb.DialTLS(s.binAddr); err == nil || !strings.Contains(err.Error(), "certificate") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("DialTLS without trusting the test CA: %v, want a certificate error", err)
	}
	if c, err := cxdb.Dial(s.binAddr, cxdb.WithRequestTimeout(10*time.Second)); err == nil {
		c.Close()
		t.Fatal("plain Dial completed HELLO on the TLS listener")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestOfficialGoClientOverTLSChild$", "-test.count=1", "-test.v")
	child.Env = append(os.Environ(), "SSL_CERT_FILE="+certs.caFile, tlsChildAddr+"="+s.binAddr)
	var out bytes.Buffer
	child.Stdout, child.Stderr = &out, &out
	if err := child.Run(); err != nil {
		t.Fatalf("official client over TLS (child process): %v\n%s\nserver log:\n%s", err, out.String(), s.log.String())
	}
	// A filter that matched nothing would pass too: check the child ran.
	if !strings.Contains(out.String(), "--- PASS: TestOfficialGoClientOverTLSChild") {
		t.Fatalf("the child process did not run the TLS test:\n%s", out.String())
	}
}

// TestOfficialGoClientOverTLSChild is the child process of
// TestOfficialGoClientOverTLS: the official client, unmodified, dials with
// DialTLS and trusts the test CA through SSL_CERT_FILE alone.
func TestOfficialGoClientOverTLSChild(t *testing.T) {
	addr := os.Getenv(tlsChildAddr)
	if addr == "" {
		t.Skip("run by TestOfficialGoClientOverTLS in a child process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cxdb.DialTLS(addr, cxdb.WithClientTag("interop-tls"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head, err := c.CreateContext(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.AppendTurn(ctx, &cxdb.AppendRequest{
		ContextID: head.ContextID, TypeID: "cxdb.ConversationItem", TypeVersion: 3,
		Payload: msgpackMap("over tls"), IdempotencyKey: "tls-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	turns, err := c.GetLast(ctx, head.ContextID, cxdb.GetLastOptions{Limit: 10, IncludePayload: true})
	if err != nil || len(turns) != 1 || turns[0].TurnID != res.TurnID || !bytes.Equal(turns[0].Payload, msgpackMap("over tls")) {
		t.Fatalf("GetLast over TLS: %+v, %v; want turn %d with its payload", turns, err, res.TurnID)
	}
}
