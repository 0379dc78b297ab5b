// Package config is the table of cardbox's settings: each a flag and an
// environment variable (a flag wins over its variable, a variable over the
// default), with its default, its meaning and the values it accepts. The
// same table makes cardboxd's flags, every cardbox command's server flags,
// `cardboxd --help`, `cardbox config` and the README's configuration
// table.
package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
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
	// BlobClaimGrace: see store.Options.BlobClaimGrace.
	BlobClaimGrace time.Duration
	// RetentionIdle and RetentionMaxAge are the server's default
	// retention policy, for every tenant without one of its own for all
	// its contexts; zero: no limit of that kind.
	RetentionIdle   time.Duration
	RetentionMaxAge time.Duration
	// RetentionShare is the share of the time the retention sweeper and
	// the reaper of deleted contexts work, between them, while they have
	// work.
	RetentionShare   float64
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
	PGTimeout           time.Duration // see store.Options.PGTimeout
	SegmentSize         int64         // see store.Options.SegmentSize
	// CompactionThreshold, EraseWithin and CompactionRate drive the
	// compactions the server runs by itself (docs/operations.md).
	CompactionThreshold float64
	EraseWithin         time.Duration
	CompactionRate      int64
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

// setting is one row of the table: a flag, its environment variable, what
// it means (markdown, as the README shows it), the values it accepts, and
// how it binds to a Config.
type setting struct {
	flag, env string
	meaning   string
	// note replaces the default in the table and the help when the
	// flag's zero default stands for something ("searched").
	note string
	rule Rule
	bind func(fs *flag.FlagSet, name, usage string)
}

// settings is the table, bound to c.
func settings(c *Config) []setting {
	str := func(p *string, def string) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, name, usage string) { fs.StringVar(p, name, def, usage) }
	}
	dur := func(p *time.Duration, def time.Duration) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, name, usage string) { fs.DurationVar(p, name, def, usage) }
	}
	i64 := func(p *int64, def int64) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, name, usage string) { fs.Int64Var(p, name, def, usage) }
	}
	num := func(p *int, def int) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, name, usage string) { fs.IntVar(p, name, def, usage) }
	}
	f64 := func(p *float64, def float64) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, name, usage string) { fs.Float64Var(p, name, def, usage) }
	}
	retention := func(p *time.Duration) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, name, usage string) { fs.Var(retentionDuration{p}, name, usage) }
	}
	boolean := func(p *bool, def bool) func(*flag.FlagSet, string, string) {
		return func(fs *flag.FlagSet, name, usage string) { fs.BoolVar(p, name, def, usage) }
	}
	return []setting{
		{flag: "data-dir", env: "CARDBOX_DATA_DIR", bind: str(&c.DataDir, "./data"),
			meaning: "data directory: blob pack, turn log and the embedded Postgres cluster"},
		{flag: "database-url", env: "CARDBOX_DATABASE_URL", bind: str(&c.DatabaseURL, ""),
			meaning: "Postgres URL; empty starts an embedded Postgres in the data directory"},
		{flag: "pg-bindir", env: "CARDBOX_PG_BINDIR", bind: str(&c.PGBinDir, ""), note: "searched",
			meaning: "directory of initdb/pg_ctl/postgres for the embedded Postgres"},
		{flag: "binary-addr", env: "CARDBOX_BINARY_ADDR", bind: str(&c.BinaryAddr, "127.0.0.1:9009"),
			meaning: "CXDB binary protocol listen address"},
		{flag: "http-addr", env: "CARDBOX_HTTP_ADDR", bind: str(&c.HTTPAddr, "127.0.0.1:9010"),
			meaning: "HTTP API listen address"},
		{flag: "log-level", env: "CARDBOX_LOG_LEVEL", bind: str(&c.LogLevel, "info"), rule: OneOf("debug", "info", "warn", "error"),
			meaning: "debug, info, warn or error"},
		{flag: "log-format", env: "CARDBOX_LOG_FORMAT", bind: str(&c.LogFormat, "text"), rule: OneOf("text", "json"),
			meaning: "text or json"},
		{flag: "http-body-limit", env: "CARDBOX_HTTP_BODY_LIMIT", bind: i64(&c.HTTPBodyLimit, 8<<20), rule: Positive,
			meaning: "largest HTTP request body in bytes (larger: 413)"},
		{flag: "shutdown-timeout", env: "CARDBOX_SHUTDOWN_TIMEOUT", bind: dur(&c.ShutdownTimeout, 30*time.Second), rule: Positive,
			meaning: "how long shutdown waits for in-flight requests"},
		{flag: "sweep-interval", env: "CARDBOX_SWEEP_INTERVAL", bind: dur(&c.SweepInterval, time.Minute), rule: Positive,
			meaning: "how often expired and long-deleted cards and boxes are purged"},
		{flag: "card-cache-bytes", env: "CARDBOX_CARD_CACHE_BYTES", bind: i64(&c.CardCacheBytes, 64<<20),
			meaning: "memory for rendered cards (cards are immutable; liveness is still read from Postgres); negative disables"},
		{flag: "render-cache-bytes", env: "CARDBOX_RENDER_CACHE_BYTES", bind: i64(&c.RenderCacheBytes, 64<<20),
			meaning: "memory for rendered CXDB turns of the typed turn pages (turns are immutable; a published bundle invalidates); negative disables"},
		{flag: "analytics", env: "CARDBOX_ANALYTICS", bind: boolean(&c.Analytics, true),
			meaning: "keep typed payloads in Postgres for SQL analytics (turn_data), projected off the append path (see [docs/analytics.md](docs/analytics.md))"},
		{flag: "analytics-max-payload", env: "CARDBOX_ANALYTICS_MAX_PAYLOAD", bind: i64(&c.AnalyticsMaxPayload, 256<<10), rule: Positive,
			meaning: "largest payload in bytes SQL analytics projects; larger turns keep only metadata (skipped = too_large)"},
		{flag: "pprof", env: "CARDBOX_PPROF", bind: boolean(&c.Pprof, false),
			meaning: "serve Go's profiler at /debug/pprof/ on the HTTP listener"},
		{flag: "deleted-retention", env: "CARDBOX_DELETED_RETENTION", bind: dur(&c.DeletedRetention, 7*24*time.Hour), rule: Positive,
			meaning: "how long soft-deleted cards and boxes are kept before purging"},
		{flag: "blob-claim-grace", env: "CARDBOX_BLOB_CLAIM_GRACE", bind: dur(&c.BlobClaimGrace, 24*time.Hour), rule: Positive,
			meaning: "how long an uploaded blob (PUT_BLOB) stays its tenant's when nothing else of the tenant needs it, once a context deletion would release it: a client may upload before it appends or attaches (see [docs/storage.md](docs/storage.md#deleting-a-context))"},
		{flag: "retention-idle", env: "CARDBOX_RETENTION_IDLE", bind: retention(&c.RetentionIdle), note: "off",
			meaning: "delete the contexts idle (no append) longer than this (`36h`, `30d`) of every tenant without a retention policy of its own for all its contexts; label policies still apply (see [docs/operations.md](docs/operations.md#retention))"},
		{flag: "retention-max-age", env: "CARDBOX_RETENTION_MAX_AGE", bind: retention(&c.RetentionMaxAge), note: "off",
			meaning: "delete the contexts older than this (`90d`) of every tenant without a retention policy of its own for all its contexts, as `--retention-idle`"},
		{flag: "retention-share", env: "CARDBOX_RETENTION_SHARE", bind: f64(&c.RetentionShare, 0.25), rule: Fraction,
			meaning: "fraction (above 0, at most 1) of the time the retention sweeper and the reaper of deleted contexts work, between them, while they have work; they rest the rest, so that appends beside them keep their speed (1: no rest; see [docs/performance.md](docs/performance.md#the-retention-sweeper-beside-appends))"},
		{flag: "max-conns", env: "CARDBOX_MAX_CONNS", bind: num(&c.MaxConns, 1024), rule: Positive,
			meaning: "most open connections per listener; more are refused (binary: ERROR 503, HTTP: 503) and counted"},
		{flag: "idle-timeout", env: "CARDBOX_IDLE_TIMEOUT", bind: dur(&c.IdleTimeout, 5*time.Minute), rule: Positive,
			meaning: "close a connection idle between requests for this long (binary sessions and HTTP keep-alive)"},
		{flag: "write-timeout", env: "CARDBOX_WRITE_TIMEOUT", bind: dur(&c.WriteTimeout, 30*time.Second), rule: Positive,
			meaning: "how long a client has to take a response (plus a second per MiB on the binary port); streams extend it as they progress"},
		{flag: "pg-timeout", env: "CARDBOX_PG_TIMEOUT", bind: dur(&c.PGTimeout, 5*time.Second), rule: Positive,
			meaning: "how long a request waits for Postgres: each statement, and an append from being queued to its group's COMMIT; past it the request is answered 503 (HTTP with `Retry-After`), and an append whose COMMIT went unanswered may still have committed: retried with its idempotency key it gets its turn (see [docs/storage.md](docs/storage.md#when-postgres-does-not-answer))"},
		{flag: "segment-size", env: "CARDBOX_SEGMENT_SIZE", bind: i64(&c.SegmentSize, 256<<20), rule: Positive,
			meaning: "largest segment of the blob pack and of the turn log in bytes: a file is a sequence of segments, each sealed once full and committed (a larger single write gets a segment of its own); a store written without segments keeps its files as its first segments (see [docs/storage.md](docs/storage.md#segments))"},
		{flag: "compaction-threshold", env: "CARDBOX_COMPACTION_THRESHOLD", bind: f64(&c.CompactionThreshold, 0.5), rule: Fraction,
			meaning: "dead share (above 0, at most 1) of a sealed segment at which the server compacts it by itself: rewrites it without its dead records: deleted contexts' and tenants' turns, deleted tenants' blobs no other tenant claims (see [docs/operations.md](docs/operations.md#compacting-the-data-files))"},
		{flag: "erase-within", env: "CARDBOX_ERASE_WITHIN", bind: dur(&c.EraseWithin, 24*time.Hour), rule: Positive,
			meaning: "bound on how long dead records stay in the files (deleted contexts' and tenants' turns, deleted tenants' blobs no other tenant claims): a segment holding bytes deleted half of it ago is compacted whatever its dead share (the active segment is closed early for it)"},
		{flag: "compaction-rate", env: "CARDBOX_COMPACTION_RATE", bind: i64(&c.CompactionRate, 8<<20), rule: Positive,
			meaning: "bytes per second compactions read and write together, so that they leave the disk to requests: a full 256 MiB segment is read twice and its live records written, 64 to 96 s at 8 MiB/s (see [docs/operations.md](docs/operations.md#compacting-the-data-files))"},
		{flag: "mode", env: "CARDBOX_MODE", bind: str(&c.Mode, ModeDev), rule: OneOf(ModeDev, ModeHosted),
			meaning: "dev (no keys, the default tenant, loopback only) or hosted (an API key on every surface; see [docs/security.md](docs/security.md))"},
		{flag: "allow-public-dev", env: "CARDBOX_ALLOW_PUBLIC_DEV", bind: boolean(&c.AllowPublicDev, false),
			meaning: "let dev mode listen on a non-loopback address (anyone who reaches it has full access)"},
		{flag: "tenant-rate", env: "CARDBOX_TENANT_RATE", bind: f64(&c.TenantRate, 2000), rule: NonNegative,
			meaning: "hosted mode: requests per second each tenant may make on each surface, unless `cardbox tenant rate` set its own; 0: no limit"},
		{flag: "tenant-max-conns", env: "CARDBOX_TENANT_MAX_CONNS", bind: num(&c.TenantMaxConns, 256), rule: NonNegative,
			meaning: "hosted mode: most binary sessions one tenant may have open (its share of `--max-conns`); 0: no limit"},
		{flag: "tenant-memory-share", env: "CARDBOX_TENANT_MEMORY_SHARE", bind: f64(&c.TenantMemoryShare, 0.25), rule: Fraction,
			meaning: "hosted mode: fraction (above 0, at most 1) of each of the two memory budgets, for binary requests and for large answers on both surfaces (64 MiB each), one tenant may hold; a budget grows so that a share holds one whole 64 MiB frame (to 256 MiB at 0.25)"},
		{flag: "tenant-burst", env: "CARDBOX_TENANT_BURST", bind: num(&c.TenantBurst, 4000), rule: Positive,
			meaning: "hosted mode: requests a tenant may make at once above its rate"},
		{flag: "tenant-quota-bytes", env: "CARDBOX_TENANT_QUOTA_BYTES", bind: i64(&c.TenantQuotaBytes, 0), rule: NonNegative,
			meaning: "hosted mode: bytes each tenant may store (its blobs as if it were alone, turns, contexts, bundles, cards and boxes), unless `cardbox tenant quota` set its own; 0: no limit (see [docs/security.md](docs/security.md#storage-quotas-hosted-mode))"},
		{flag: "access-log", env: "CARDBOX_ACCESS_LOG", bind: boolean(&c.AccessLog, true),
			meaning: "log every HTTP request at info (method, route, status, bytes, duration, peer)"},
		{flag: "tls-cert", env: "CARDBOX_TLS_CERT", bind: str(&c.TLSCert, ""),
			meaning: "PEM certificate (chain) file; with `--tls-key`, both listeners speak TLS only (1.2 or later); neither: plain TCP; only one: start-up error"},
		{flag: "tls-key", env: "CARDBOX_TLS_KEY", bind: str(&c.TLSKey, ""),
			meaning: "PEM private key file of `--tls-cert`"},
		{flag: "tls-handshake-timeout", env: "CARDBOX_TLS_HANDSHAKE_TIMEOUT", bind: dur(&c.TLSHandshakeTimeout, 10*time.Second), rule: Positive,
			meaning: "how long a client has to complete the TLS handshake before its connection is closed"},
		{flag: "sql-addr", env: "CARDBOX_SQL_ADDR", bind: str(&c.SQLAddr, ""),
			meaning: "embedded Postgres only: also listen on this loopback address (e.g. `127.0.0.1:5433`) for analysts' SQL roles, a password (SCRAM) required of every role; empty: its unix socket only; see [docs/security.md](docs/security.md#sql-access-for-analysts)"},
		{flag: "operator-key-file", env: "CARDBOX_OPERATOR_KEY_FILE", bind: str(&c.OperatorKeyFile, ""),
			meaning: "hosted mode: file holding the secret of the first operator key (`cbk_key_...`), read once at start-up; the key is created if missing, and a revoked or different key of its id stops the start (see [Run with Docker Compose](#run-with-docker-compose))"},
	}
}

// Names returns every setting's flag name, in the table's order.
func Names() []string {
	var names []string
	for _, s := range settings(&Config{}) {
		names = append(names, s.flag)
	}
	return names
}

// Setting describes one setting for help texts.
type Setting struct {
	Flag, Env string
	// Default is the default as help shows it: the flag's default value,
	// or what an empty one stands for ("searched"), or "" for none.
	Default string
	// Usage is the meaning as plain text.
	Usage string
}

// Lookup describes the setting whose flag is name.
func Lookup(name string) (Setting, bool) {
	c := &Config{}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	for _, s := range settings(c) {
		if s.flag != name {
			continue
		}
		s.bind(fs, s.flag, "")
		def := fs.Lookup(s.flag).DefValue
		if s.note != "" {
			def = s.note
		}
		return Setting{Flag: s.flag, Env: s.env, Default: def, Usage: PlainText(s.meaning)}, true
	}
	return Setting{}, false
}

// Bound is the settings a command reads, defined on its flag set.
type Bound struct {
	// Config holds the settings' values once the flag set has parsed its
	// arguments and Apply has run.
	Config *Config
	fs     *flag.FlagSet
	used   []setting
}

// Bind defines the settings named (flag names of the table) on fs, each
// with its default and its plain-text meaning as usage. An unknown name
// is a programming error and panics.
func Bind(fs *flag.FlagSet, names []string) *Bound {
	c := &Config{}
	all := settings(c)
	b := &Bound{Config: c, fs: fs}
	for _, name := range names {
		i := indexOf(all, name)
		if i < 0 {
			panic(fmt.Sprintf("config: no setting %q", name))
		}
		s := all[i]
		s.bind(fs, s.flag, PlainText(s.meaning))
		b.used = append(b.used, s)
	}
	return b
}

func indexOf(all []setting, name string) int {
	for i, s := range all {
		if s.flag == name {
			return i
		}
	}
	return -1
}

// Apply runs after fs parsed the command line: a setting not given there
// takes its environment variable's value, then every setting's value is
// checked against its rule. Errors name the flag, and the variable when
// the value came from it.
func (b *Bound) Apply() error {
	given := map[string]bool{}
	b.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	fromEnv := map[string]bool{}
	for _, s := range b.used {
		v, ok := os.LookupEnv(s.env)
		if !ok || given[s.flag] {
			continue
		}
		if err := b.fs.Set(s.flag, v); err != nil {
			return fmt.Errorf("%s=%q (--%s): %w", s.env, v, s.flag, err)
		}
		fromEnv[s.flag] = true
	}
	for _, s := range b.used {
		env := ""
		if fromEnv[s.flag] {
			env = s.env
		}
		if err := Check(b.fs, s.flag, env, s.rule); err != nil {
			return err
		}
	}
	return nil
}

// Markdown renders the settings as the README's configuration table.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	for _, s := range settings(&Config{}) {
		s.bind(fs, s.flag, "")
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s |\n", s.flag, s.env, markdownDefault(s, fs.Lookup(s.flag).DefValue), s.meaning)
	}
	return b.String()
}

func markdownDefault(s setting, def string) string {
	switch {
	case s.note != "":
		return "(" + s.note + ")"
	case def == "":
		return "(empty)"
	}
	return "`" + def + "`"
}

var mdLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// PlainText is a meaning without its markdown: links become their text,
// code spans lose their backticks.
func PlainText(md string) string {
	return strings.ReplaceAll(mdLink.ReplaceAllString(md, "$1"), "`", "")
}

// retentionDuration is a retention duration flag: a Go duration ("36h")
// or whole days ("30d"), as `cardbox tenant retention` takes them, at
// least a second; empty (the default) is none. It checks its value as it
// parses it, since its zero, meaning none, cannot be given as such: an
// explicit "0" or "-1h" is refused rather than read as off.
type retentionDuration struct{ p *time.Duration }

// Set parses s.
func (r retentionDuration) Set(s string) error {
	if s == "" {
		*r.p = 0
		return nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 32)
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	switch {
	case err != nil:
		return errors.New("want a duration such as 36h or 30d, or empty for none")
	case d < time.Second:
		return errors.New("must be at least 1s (empty: none)")
	}
	*r.p = d
	return nil
}

// String is the value as given: whole days as such, empty for none.
func (r retentionDuration) String() string {
	switch {
	case r.p == nil || *r.p == 0:
		return ""
	case *r.p%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", *r.p/(24*time.Hour))
	}
	return r.p.String()
}

// Get returns the duration (flag.Getter).
func (r retentionDuration) Get() any { return *r.p }
