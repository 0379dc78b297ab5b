package daemon

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/internal/tlslisten"
)

// serverTLS loads the certificate the settings name: nil with neither file
// set (plain TCP), an error with only one, since serving plain TCP when
// the operator meant TLS would be the worse surprise.
func serverTLS(cfg *Config) (*tls.Config, error) {
	switch {
	case cfg.TLSCert == "" && cfg.TLSKey == "":
		return nil, nil
	case cfg.TLSKey == "":
		return nil, errors.New("--tls-cert (CARDBOX_TLS_CERT) is set but --tls-key (CARDBOX_TLS_KEY) is not: set both to serve TLS, or neither for plain TCP")
	case cfg.TLSCert == "":
		return nil, errors.New("--tls-key (CARDBOX_TLS_KEY) is set but --tls-cert (CARDBOX_TLS_CERT) is not: set both to serve TLS, or neither for plain TCP")
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", cfg.TLSCert, cfg.TLSKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// secure puts TLS on both listeners. Handshakes run beside Accept under
// --tls-handshake-timeout (see tlslisten); the connection limits beneath
// go on counting raw connections, so a client in its handshake holds a
// slot, for at most the timeout.
//
// HTTP offers only HTTP/1.1: --max-conns and the slow-client deadlines
// bound connections, and HTTP/2 would carry up to 250 concurrent requests
// on each.
func secure(bin, web net.Listener, tlsCfg *tls.Config, cfg *Config, log *slog.Logger) (binTLS, webTLS *tlslisten.Listener) {
	webCfg := tlsCfg.Clone()
	webCfg.NextProtos = []string{"http/1.1"}
	binTLS = tlslisten.New(bin, tlslisten.Options{
		Config: tlsCfg, HandshakeTimeout: cfg.TLSHandshakeTimeout, Logger: log.With("listener", "binary"),
	})
	webTLS = tlslisten.New(web, tlslisten.Options{
		Config: webCfg, HandshakeTimeout: cfg.TLSHandshakeTimeout, Logger: log.With("listener", "http"),
		Plaintext: api.RefusePlaintext,
	})
	return binTLS, webTLS
}
