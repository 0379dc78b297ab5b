package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
)

// runHealth is `cardbox health`: it asks a running cardboxd whether it
// serves, GET /healthz on --http-addr (CARDBOX_HTTP_ADDR, the server's own
// setting, so a container's health check needs no flags). It prints one
// line and returns nil on a 200, an error (exit 1) on anything else. It
// sends no key: /healthz needs none in either mode.
func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cardbox health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	settings := config.Bind(fs, []string{"http-addr", "tls-cert"})
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	wait := fs.Duration("wait", 0, healthWaitUsage)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("health: unexpected arguments: %v", fs.Args())
	}
	if err := settings.Apply(); err != nil {
		return fmt.Errorf("health: %w", err)
	}
	cfg := settings.Config
	url, client, err := healthClient(cfg, *timeout)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(*wait)
	for {
		err := askHealth(ctx, client, url)
		if err == nil {
			fmt.Fprintf(stdout, "ok: %s answered 200 OK\n", url)
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("health: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("health: %w (%w)", err, ctx.Err())
		case <-time.After(min(healthRetry, time.Until(deadline))):
		}
	}
}

// healthWaitUsage is the help of --wait, which main.go's description of
// the command repeats.
const healthWaitUsage = "ask again until a 200 or this long has passed, while the server is not up yet (refuses connections) or answers anything else: for a server just started (0: ask once)"

// healthRetry is how long --wait waits between two questions.
const healthRetry = 200 * time.Millisecond

// askHealth asks url once and returns an error unless it answers 200.
func askHealth(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, res.Status)
	}
	return nil
}

// healthClient returns the URL of /healthz on the server's HTTP address
// and a client for it (see serverClient).
func healthClient(cfg *config.Config, timeout time.Duration) (string, *http.Client, error) {
	base, client, err := serverClient(cfg, timeout)
	return base + "/healthz", client, err
}

// serverClient returns the base URL (scheme, host and port) of the
// server's HTTP address and a client for it. An address that listens on
// every interface (0.0.0.0:9010, [::]:9010, :9010, as in the container
// image) is asked on the loopback address. With --tls-cert set the server
// speaks TLS only: the client then accepts exactly the certificate in
// that file, whatever names it holds, since the CLI runs beside the
// server and dials an address the certificate need not name.
func serverClient(cfg *config.Config, timeout time.Duration) (string, *http.Client, error) {
	host, port, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil {
		return "", nil, fmt.Errorf("--http-addr %q: %w", cfg.HTTPAddr, err)
	}
	switch ip := net.ParseIP(host); {
	case host == "":
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified() && ip.To4() != nil:
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1"
	}
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	scheme := "http"
	if cfg.TLSCert != "" {
		leaf, err := firstCertificate(cfg.TLSCert)
		if err != nil {
			return "", nil, err
		}
		scheme = "https"
		tr.TLSClientConfig = &tls.Config{
			MinVersion: tls.VersionTLS12,
			// Verified below: the server must present the configured
			// certificate itself.
			InsecureSkipVerify: true,
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				if len(raw) == 0 || !bytes.Equal(raw[0], leaf) {
					return errors.New("the server did not present the certificate of --tls-cert")
				}
				return nil
			},
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port), &http.Client{Transport: tr, Timeout: timeout}, nil
}

// firstCertificate returns the DER bytes of the first certificate in a
// PEM file (the server's own; intermediates follow it).
func firstCertificate(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert: %w", err)
	}
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, fmt.Errorf("--tls-cert %s: no PEM certificate", path)
		}
		if block.Type == "CERTIFICATE" {
			return block.Bytes, nil
		}
	}
}
