// Package config reads cardbox's settings from flags and environment
// variables (a flag wins over its variable, a variable over the default).
// The README's configuration table lists the same settings.
package config

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Config is every setting of cardboxd and the cardbox CLI.
type Config struct {
	DataDir          string
	DatabaseURL      string
	PGBinDir         string
	BinaryAddr       string
	HTTPAddr         string
	LogLevel         string
	LogFormat        string
	HTTPBodyLimit    int64
	ShutdownTimeout  time.Duration
	SweepInterval    time.Duration
	DeletedRetention time.Duration
	Pprof            bool
	CardCacheBytes   int64
	RenderCacheBytes int64
	// Analytics turns SQL analytics' projector on; AnalyticsMaxPayload is
	// the largest payload it projects (docs/analytics.md).
	Analytics           bool
	AnalyticsMaxPayload int64
	MaxConns            int
	IdleTimeout         time.Duration
	WriteTimeout        time.Duration
	AccessLog           bool
	Mode                string
	AllowPublicDev      bool
	TenantRate          float64
	TenantMaxConns      int
	// TenantMemoryShare is the fraction of the binary port's request and
	// answer budgets one tenant may hold (hosted mode).
	TenantMemoryShare float64
	TenantBurst       int
	TenantQuotaBytes  int64
	// TLSCert and TLSKey are PEM files; with both set, both listeners
	// speak TLS only (see cmd/cardboxd).
	TLSCert             string
	TLSKey              string
	TLSHandshakeTimeout time.Duration
	// SQLAddr is the embedded Postgres's loopback TCP address for
	// analysts' SQL roles; empty: its unix socket only.
	SQLAddr string
	// OperatorKeyFile holds the secret of the first operator key, which
	// cardboxd creates at start-up in hosted mode if it does not exist.
	OperatorKeyFile string
}

// Modes of cardboxd.
const (
	// ModeDev: no keys, the default tenant, loopback listeners only.
	ModeDev = "dev"
	// ModeHosted: a key on every surface, requests act for its tenant.
	ModeHosted = "hosted"
)

// setting describes one flag and its environment variable.
type setting struct {
	flag, env, usage string
	bind             func(fs *flag.FlagSet, name, usage string)
}

func settings(c *Config) []setting {
	str := func(p *string, def string) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, name, usage string) { fs.StringVar(p, name, def, usage) }
	}
	dur := func(p *time.Duration, def time.Duration) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, name, usage string) { fs.DurationVar(p, name, def, usage) }
	}
	return []setting{
		{"data-dir", "CARDBOX_DATA_DIR", "data directory: blob pack, turn log and the embedded Postgres cluster", str(&c.DataDir, "./data")},
		{"database-url", "CARDBOX_DATABASE_URL", "Postgres URL; empty starts an embedded Postgres in the data directory", str(&c.DatabaseURL, "")},
		{"pg-bindir", "CARDBOX_PG_BINDIR", "directory of initdb/pg_ctl/postgres for the embedded Postgres (default: searched)", str(&c.PGBinDir, "")},
		{"binary-addr", "CARDBOX_BINARY_ADDR", "CXDB binary protocol listen address", str(&c.BinaryAddr, "127.0.0.1:9009")},
		{"http-addr", "CARDBOX_HTTP_ADDR", "HTTP API listen address", str(&c.HTTPAddr, "127.0.0.1:9010")},
		{"log-level", "CARDBOX_LOG_LEVEL", "debug, info, warn or error", str(&c.LogLevel, "info")},
		{"log-format", "CARDBOX_LOG_FORMAT", "text or json", str(&c.LogFormat, "text")},
		{"http-body-limit", "CARDBOX_HTTP_BODY_LIMIT", "largest HTTP request body in bytes (larger: 413)", func(fs *flag.FlagSet, name, usage string) {
			fs.Int64Var(&c.HTTPBodyLimit, name, 8<<20, usage)
		}},
		{"shutdown-timeout", "CARDBOX_SHUTDOWN_TIMEOUT", "how long shutdown waits for in-flight requests", dur(&c.ShutdownTimeout, 30*time.Second)},
		{"sweep-interval", "CARDBOX_SWEEP_INTERVAL", "how often expired and long-deleted cards and boxes are purged", dur(&c.SweepInterval, time.Minute)},
		{"card-cache-bytes", "CARDBOX_CARD_CACHE_BYTES", "memory for rendered cards (cards are immutable; liveness is still read from Postgres); negative disables", func(fs *flag.FlagSet, name, usage string) {
			fs.Int64Var(&c.CardCacheBytes, name, 64<<20, usage)
		}},
		{"render-cache-bytes", "CARDBOX_RENDER_CACHE_BYTES", "memory for rendered CXDB turns of the typed turn pages (turns are immutable; a published bundle invalidates); negative disables", func(fs *flag.FlagSet, name, usage string) {
			fs.Int64Var(&c.RenderCacheBytes, name, 64<<20, usage)
		}},
		{"analytics", "CARDBOX_ANALYTICS", "keep typed payloads in Postgres for SQL analytics (turn_data), projected off the append path", func(fs *flag.FlagSet, name, usage string) {
			fs.BoolVar(&c.Analytics, name, true, usage)
		}},
		{"analytics-max-payload", "CARDBOX_ANALYTICS_MAX_PAYLOAD", "largest payload in bytes SQL analytics projects; larger turns keep only metadata (skipped = too_large)", func(fs *flag.FlagSet, name, usage string) {
			fs.Int64Var(&c.AnalyticsMaxPayload, name, 256<<10, usage)
		}},
		{"pprof", "CARDBOX_PPROF", "serve Go's profiler at /debug/pprof/ on the HTTP listener", func(fs *flag.FlagSet, name, usage string) {
			fs.BoolVar(&c.Pprof, name, false, usage)
		}},
		{"deleted-retention", "CARDBOX_DELETED_RETENTION", "how long soft-deleted cards and boxes are kept before purging", dur(&c.DeletedRetention, 7*24*time.Hour)},
		{"max-conns", "CARDBOX_MAX_CONNS", "most open connections per listener; more are refused (binary: ERROR 503, HTTP: 503) and counted", func(fs *flag.FlagSet, name, usage string) {
			fs.IntVar(&c.MaxConns, name, 1024, usage)
		}},
		{"idle-timeout", "CARDBOX_IDLE_TIMEOUT", "close a connection idle between requests for this long (binary sessions and HTTP keep-alive)", dur(&c.IdleTimeout, 5*time.Minute)},
		{"write-timeout", "CARDBOX_WRITE_TIMEOUT", "how long a client has to take a response (plus a second per MiB on the binary port); streams extend it as they progress", dur(&c.WriteTimeout, 30*time.Second)},
		{"mode", "CARDBOX_MODE", "dev (no keys, the default tenant, loopback only) or hosted (an API key on every surface; see docs/security.md)", str(&c.Mode, ModeDev)},
		{"allow-public-dev", "CARDBOX_ALLOW_PUBLIC_DEV", "let dev mode listen on a non-loopback address (anyone who reaches it has full access)", func(fs *flag.FlagSet, name, usage string) {
			fs.BoolVar(&c.AllowPublicDev, name, false, usage)
		}},
		{"tenant-rate", "CARDBOX_TENANT_RATE", "hosted mode: requests per second each tenant may make on each surface, unless cardbox tenant rate set its own; 0: no limit", func(fs *flag.FlagSet, name, usage string) {
			fs.Float64Var(&c.TenantRate, name, 2000, usage)
		}},
		{"tenant-max-conns", "CARDBOX_TENANT_MAX_CONNS", "hosted mode: most binary sessions one tenant may have open (its share of --max-conns)", func(fs *flag.FlagSet, name, usage string) {
			fs.IntVar(&c.TenantMaxConns, name, 256, usage)
		}},
		{"tenant-memory-share", "CARDBOX_TENANT_MEMORY_SHARE", "hosted mode: fraction of the binary port's memory budgets for requests and answers (64 MiB each) one tenant may hold; at least one frame (16 MiB)", func(fs *flag.FlagSet, name, usage string) {
			fs.Float64Var(&c.TenantMemoryShare, name, 0.25, usage)
		}},
		{"tenant-burst", "CARDBOX_TENANT_BURST", "hosted mode: requests a tenant may make at once above its rate", func(fs *flag.FlagSet, name, usage string) {
			fs.IntVar(&c.TenantBurst, name, 4000, usage)
		}},
		{"tenant-quota-bytes", "CARDBOX_TENANT_QUOTA_BYTES", "hosted mode: bytes each tenant may store (its blobs as if it were alone, turns, contexts, bundles, cards and boxes), unless cardbox tenant quota set its own; 0: no limit", func(fs *flag.FlagSet, name, usage string) {
			fs.Int64Var(&c.TenantQuotaBytes, name, 0, usage)
		}},
		{"access-log", "CARDBOX_ACCESS_LOG", "log every HTTP request at info (method, route, status, bytes, duration, peer)", func(fs *flag.FlagSet, name, usage string) {
			fs.BoolVar(&c.AccessLog, name, true, usage)
		}},
		{"tls-cert", "CARDBOX_TLS_CERT", "PEM certificate (chain) file; with --tls-key, both listeners speak TLS only (1.2 or later); neither: plain TCP", str(&c.TLSCert, "")},
		{"tls-key", "CARDBOX_TLS_KEY", "PEM private key file of --tls-cert", str(&c.TLSKey, "")},
		{"tls-handshake-timeout", "CARDBOX_TLS_HANDSHAKE_TIMEOUT", "how long a client has to complete the TLS handshake before its connection is closed", dur(&c.TLSHandshakeTimeout, 10*time.Second)},
		{"sql-addr", "CARDBOX_SQL_ADDR", "embedded Postgres only: also listen on this loopback address (127.0.0.1:5433) for analysts' SQL roles, a password (SCRAM) required of every role; empty: its unix socket only", str(&c.SQLAddr, "")},
		{"operator-key-file", "CARDBOX_OPERATOR_KEY_FILE", "hosted mode: file holding the secret of the first operator key (cbk_key_...), read once at start-up; the key is created if missing, and a revoked or different key of its id stops the start", str(&c.OperatorKeyFile, "")},
	}
}

// Parse reads args (without the program name) and the environment.
// It returns flag.ErrHelp after printing usage for -h/--help.
func Parse(name string, args []string, out io.Writer) (*Config, error) {
	c, rest, err := ParseCommand(name, args, out, nil)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected arguments: %s", strings.Join(rest, " "))
	}
	return c, err
}

// ParseCommand is Parse for a command with flags and arguments of its own:
// own (if not nil) adds the command's flags, and the arguments left after
// the flags are returned.
func ParseCommand(name string, args []string, out io.Writer, own func(fs *flag.FlagSet)) (*Config, []string, error) {
	c := &Config{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	all := settings(c)
	for _, s := range all {
		s.bind(fs, s.flag, fmt.Sprintf("%s (env %s)", s.usage, s.env))
	}
	if own != nil {
		own(fs)
	}
	fs.Usage = func() { usage(fs, name, all, out) }
	for _, s := range all {
		if v, ok := os.LookupEnv(s.env); ok {
			if err := fs.Set(s.flag, v); err != nil {
				return nil, nil, fmt.Errorf("%s=%q: %w", s.env, v, err)
			}
		}
	}
	// Flags may come after arguments too ("tenant create acme --name X").
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		if fs.NArg() == 0 {
			return c, rest, nil
		}
		rest, args = append(rest, fs.Arg(0)), fs.Args()[1:]
	}
}

func usage(fs *flag.FlagSet, name string, all []setting, out io.Writer) {
	fmt.Fprintf(out, "Usage: %s [flags]\n\nEvery flag can also be set by its environment variable.\n\n", name)
	for _, s := range all {
		f := fs.Lookup(s.flag)
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(out, "  --%-18s %-26s %s (default %s)\n", s.flag, s.env, s.usage, def)
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.ContainsFunc(all, func(s setting) bool { return s.flag == f.Name }) {
			fmt.Fprintf(out, "  --%-18s %-26s %s\n", f.Name, "", f.Usage)
		}
	})
}

// Markdown renders the settings as the README's configuration table.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	c := &Config{}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	for _, s := range settings(c) {
		s.bind(fs, s.flag, s.usage)
		fmt.Fprintf(&b, "| `--%s` | `%s` | `%s` | %s |\n", s.flag, s.env, fs.Lookup(s.flag).DefValue, s.usage)
	}
	return b.String()
}
