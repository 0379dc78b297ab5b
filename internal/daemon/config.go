package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/membudget"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/compact"
)

// Modes of the daemon.
const (
	// ModeDev: no keys, the default tenant, loopback listeners only.
	ModeDev = "dev"
	// ModeHosted: a key on every surface, requests act for its tenant.
	ModeHosted = "hosted"
)

// Config is what the daemon serves and how. Its settings are cardboxd's
// (the table in cmd/internal/config says what each means and accepts);
// Defaults holds their defaults.
type Config struct {
	DataDir          string
	BinaryAddr       string
	HTTPAddr         string
	Mode             string
	AllowPublicDev   bool
	HTTPBodyLimit    int64
	ShutdownTimeout  time.Duration
	SweepInterval    time.Duration
	DeletedRetention time.Duration
	// RetentionIdle and RetentionMaxAge are the server's default
	// retention policy, for every tenant without one of its own for all
	// its contexts; zero: no limit of that kind.
	RetentionIdle   time.Duration
	RetentionMaxAge time.Duration
	// RetentionShare is the share of the time the retention sweeper and
	// the reaper of deleted contexts (with its release of blob claims)
	// work, between them, while they have work (0 or 1: all of it).
	RetentionShare   float64
	Pprof            bool
	AccessLog        bool
	CardCacheBytes   int64
	RenderCacheBytes int64
	// Analytics turns SQL analytics' projector on; AnalyticsMaxPayload is
	// the largest payload it projects.
	Analytics           bool
	AnalyticsMaxPayload int64
	MaxConns            int
	IdleTimeout         time.Duration
	WriteTimeout        time.Duration
	PGTimeout           time.Duration
	// BlobClaimGrace is store.Options.BlobClaimGrace (zero: its default).
	BlobClaimGrace time.Duration
	// SegmentSize bounds the segments of the blob pack and the turn log
	// (store.Options.SegmentSize); zero: one unbounded segment each.
	SegmentSize int64
	// CompactionThreshold is the dead share (above 0, at most 1) of a
	// sealed segment at which the server compacts it by itself.
	CompactionThreshold float64
	// EraseWithin bounds how long a deleted context's or tenant's bytes
	// stay in the files: a segment holding bytes deleted longer ago than
	// half of it is compacted whatever its dead share.
	EraseWithin time.Duration
	// CompactionRate bounds the bytes per second compactions read and
	// write.
	CompactionRate int64
	// The tenants' shares, in hosted mode.
	TenantRate        float64
	TenantBurst       int
	TenantMaxConns    int
	TenantMemoryShare float64
	TenantQuotaBytes  int64
	// TLSCert and TLSKey are PEM files; with both set, both listeners
	// speak TLS only.
	TLSCert             string
	TLSKey              string
	TLSHandshakeTimeout time.Duration
	// OperatorKeyFile holds the secret of the first operator key, which
	// the daemon creates at start-up in hosted mode if it does not exist.
	OperatorKeyFile string

	// OpenDatabase opens the migrated database the daemon serves from,
	// once the daemon holds the data directory's lock and its listeners
	// (cardboxd: the embedded cluster or the URL's server). When nil,
	// Pool is used.
	OpenDatabase func(ctx context.Context, log *slog.Logger) (*Database, error)
	// Pool is a migrated database the caller owns (a test's), used when
	// OpenDatabase is nil.
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// Test varies what tests need to vary; production leaves it zero.
	Test TestOptions
}

// TestOptions change one thing each for tests, which production leaves
// at its default; everything else is wired as in production.
type TestOptions struct {
	// QuotaRefresh is how long a tenant's own quota is used before it is
	// read again (quota.Options.RefreshEvery; negative: at every write).
	QuotaRefresh time.Duration
	// Heartbeat is the CXDB routes' (cxdbhttp.Options); AnswerWait theirs
	// and the CardBox routes' (cardboxhttp.Options).
	Heartbeat  time.Duration
	AnswerWait time.Duration
	// Answers, if set, is the HTTP routes' answer budget (the CXDB and
	// CardBox routes') instead of the binary server's, which they share in
	// production.
	Answers *membudget.Budget
	// WrapStore, if set, wraps the turn store the CXDB service uses (a
	// test that holds appends at a gate).
	WrapStore func(service.Store) service.Store
	// Now, if set, is the clock of the CXDB service (event times and the
	// retention sweeper's now) and of the CardBox service and its sweeper
	// (a test that moves time past a card's expiry); time.Now when nil.
	Now func() time.Time
	// CompactionHook, if set, is the store's (store.Options): called
	// after each step of a compaction of a segment (a test that holds a
	// compaction running at a gate).
	CompactionHook func(compact.Step) error
	// CompactionTick, if set, is when the compaction trigger checks the
	// segments' dead bytes, instead of its ticker: a test sends to it
	// (a second send returns once the first check is done).
	CompactionTick chan time.Time
}

// Database is the Postgres the daemon serves from.
type Database struct {
	// Pool serves requests; Background, if set, the background work that
	// must yield the CPU to them (the analytics projector).
	Pool       *pgxpool.Pool
	Background *pgxpool.Pool
	// Collector, if set, is the database's own metrics.
	Collector prometheus.Collector
	// Record, if set, records in the data directory which database holds
	// its store, once the store opened.
	Record func(dataDir string) error
	// Close, if set, closes the database at the end of Shutdown.
	Close func(ctx context.Context) error
}

// Defaults is cardboxd's default configuration (cmd/internal/config's
// defaults; cmd/cardboxd's tests check that they agree).
func Defaults() Config {
	return Config{
		DataDir:             "./data",
		BinaryAddr:          "127.0.0.1:9009",
		HTTPAddr:            "127.0.0.1:9010",
		Mode:                ModeDev,
		HTTPBodyLimit:       8 << 20,
		ShutdownTimeout:     30 * time.Second,
		SweepInterval:       time.Minute,
		DeletedRetention:    7 * 24 * time.Hour,
		AccessLog:           true,
		CardCacheBytes:      64 << 20,
		RenderCacheBytes:    64 << 20,
		Analytics:           true,
		AnalyticsMaxPayload: 256 << 10,
		MaxConns:            1024,
		IdleTimeout:         5 * time.Minute,
		WriteTimeout:        30 * time.Second,
		PGTimeout:           5 * time.Second,
		SegmentSize:         256 << 20,
		CompactionThreshold: DefaultCompactionThreshold,
		EraseWithin:         DefaultEraseWithin,
		CompactionRate:      DefaultCompactionRate,
		TenantRate:          2000,
		TenantBurst:         4000,
		TenantMaxConns:      256,
		TenantMemoryShare:   0.25,
		RetentionShare:      0.25,
		BlobClaimGrace:      store.DefaultBlobClaimGrace,
		TLSHandshakeTimeout: 10 * time.Second,
	}
}

// check refuses an unknown mode, no way to reach Postgres, and dev mode
// (no keys: whoever connects has full access) on an address beyond this
// machine unless AllowPublicDev says that is meant.
func (cfg *Config) check() error {
	if cfg.OpenDatabase == nil && cfg.Pool == nil {
		return fmt.Errorf("daemon: no database: set OpenDatabase or Pool")
	}
	if t := cfg.CompactionThreshold; t <= 0 || t > 1 {
		return fmt.Errorf("--compaction-threshold %v: want a fraction above 0, at most 1", t)
	}
	if cfg.EraseWithin <= 0 {
		return fmt.Errorf("--erase-within %v: want a duration above 0", cfg.EraseWithin)
	}
	if cfg.CompactionRate <= 0 {
		return fmt.Errorf("--compaction-rate %d: want a positive number of bytes per second", cfg.CompactionRate)
	}
	if cfg.TenantQuotaBytes < 0 {
		return fmt.Errorf("--tenant-quota-bytes %d: want 0 (no quota) or a positive number of bytes", cfg.TenantQuotaBytes)
	}
	switch cfg.Mode {
	case ModeHosted:
		if s := cfg.TenantMemoryShare; s <= 0 || s > 1 {
			return fmt.Errorf("--tenant-memory-share %v: want a fraction above 0, at most 1", s)
		}
		return nil
	case ModeDev:
	default:
		return fmt.Errorf("--mode %q: want dev or hosted", cfg.Mode)
	}
	if cfg.AllowPublicDev {
		return nil
	}
	for _, addr := range []string{cfg.BinaryAddr, cfg.HTTPAddr} {
		if !loopback(addr) {
			return fmt.Errorf("dev mode has no keys, so it listens on loopback addresses only; %s is not one: "+
				"use --mode hosted (see docs/security.md), or --allow-public-dev if anyone reaching it may do anything", addr)
		}
	}
	return nil
}

// loopback reports whether a listen address binds to this machine only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// handedPayloads is the largest payload the store hands the analytics
// projector with its turn, which the projector would otherwise read back
// from the blob pack and decompress: up to 64 KiB, none with analytics
// off.
func (cfg *Config) handedPayloads() int {
	if !cfg.Analytics {
		return 0
	}
	return int(min(cfg.AnalyticsMaxPayload, 64<<10))
}
