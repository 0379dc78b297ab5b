// Package testcert makes throwaway certificates for tests: a private CA
// and a server certificate it signs for 127.0.0.1, ::1 and localhost, so a
// test can serve real TLS that a client verifies against the CA alone.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Set is a CA and a server certificate it issued, PEM-encoded.
type Set struct {
	CAPEM   []byte // the CA certificate: what clients trust
	CertPEM []byte // the server certificate
	KeyPEM  []byte // the server's private key

	// Dir holds the three as ca.pem, cert.pem and key.pem.
	Dir string
}

// CAFile is the path of the CA certificate in Dir.
func (s *Set) CAFile() string { return filepath.Join(s.Dir, "ca.pem") }

// CertFile is the path of the server certificate in Dir.
func (s *Set) CertFile() string { return filepath.Join(s.Dir, "cert.pem") }

// KeyFile is the path of the server's private key in Dir.
func (s *Set) KeyFile() string { return filepath.Join(s.Dir, "key.pem") }

// Pool is a certificate pool holding only the CA.
func (s *Set) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(s.CAPEM)
	return p
}

// ClientConfig trusts the CA alone.
func (s *Set) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: s.Pool(), MinVersion: tls.VersionTLS12}
}

// New makes a CA and a server certificate valid for an hour and writes
// them to a temporary directory the test removes.
func New(t testing.TB) *Set {
	t.Helper()
	s, err := generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func generate(dir string) (*Set, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cardbox test CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("server key: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("server key: %w", err)
	}
	s := &Set{
		CAPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Dir:     dir,
	}
	for path, b := range map[string][]byte{s.CAFile(): s.CAPEM, s.CertFile(): s.CertPEM, s.KeyFile(): s.KeyPEM} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	return s, nil
}

// ServerConfig serves the server certificate (TLS 1.2 or later).
func (s *Set) ServerConfig() (*tls.Config, error) {
	cert, err := tls.X509KeyPair(s.CertPEM, s.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("server key pair: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
