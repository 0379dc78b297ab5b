package client

import (
	"crypto/tls"
	"time"
)

// Defaults match the official CXDB Go client.
const (
	// DefaultDialTimeout bounds establishing the TCP (and TLS) connection.
	DefaultDialTimeout = 5 * time.Second
	// DefaultRequestTimeout applies to a request whose context has no
	// deadline.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultLimit replaces a zero limit in GetLast and GetBefore, as the
	// official client does.
	DefaultLimit = 10
)

// Option configures Dial and NewClient.
type Option func(*options)

type options struct {
	clientTag      string
	clientMeta     []byte
	dialTimeout    time.Duration
	requestTimeout time.Duration
	tlsConfig      *tls.Config
	pipelining     bool
}

func defaultOptions() options {
	return options{dialTimeout: DefaultDialTimeout, requestTimeout: DefaultRequestTimeout}
}

func applyOptions(opts []Option) options {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithClientTag sets the HELLO client_tag (default empty).
func WithClientTag(tag string) Option { return func(o *options) { o.clientTag = tag } }

// WithClientMeta sets the HELLO client_meta_json, e.g. {"api_key":"…"}.
// It must be valid JSON; the official client always sends it empty.
func WithClientMeta(metaJSON []byte) Option {
	return func(o *options) { o.clientMeta = append([]byte(nil), metaJSON...) }
}

// WithDialTimeout bounds connection establishment (default 5 s; 0 = no
// limit beyond the Dial context).
func WithDialTimeout(d time.Duration) Option { return func(o *options) { o.dialTimeout = d } }

// WithRequestTimeout sets the deadline applied to requests whose context
// has none (default 30 s; 0 disables it).
func WithRequestTimeout(d time.Duration) Option { return func(o *options) { o.requestTimeout = d } }

// WithTLS makes Dial connect over TLS with cfg (nil = default config), like
// the official client's DialTLS.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) {
		if cfg == nil {
			cfg = &tls.Config{}
		}
		o.tlsConfig = cfg
	}
}

// WithPipelining lets the typed methods run concurrently on the connection
// (responses are matched by req_id). By default they are serialised, one
// request in flight, like the official client. Do is always concurrent.
func WithPipelining() Option { return func(o *options) { o.pipelining = true } }
