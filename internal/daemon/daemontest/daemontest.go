// Package daemontest runs the real daemon in tests: cardboxd's defaults
// on a fresh internal/pgtest database, a t.TempDir data directory and
// loopback ports the system picks.
package daemontest

import (
	"context"
	"testing"
	"time"

	"github.com/cardboxhq/cardbox/internal/daemon"
	"github.com/cardboxhq/cardbox/internal/pgtest"
)

// shutdownTimeout bounds a test daemon's shutdown.
const shutdownTimeout = 30 * time.Second

// Config is cardboxd's default configuration for a test: a data
// directory of t's and loopback ports the system picks. Its database is
// left unset: Start gives it a fresh one unless the test sets Pool.
func Config(t testing.TB) daemon.Config {
	t.Helper()
	cfg := daemon.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.BinaryAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	return cfg
}

// Start builds and starts a daemon of cfg (a fresh pgtest database when
// cfg names none) and shuts it down when t ends, failing t if that
// fails.
func Start(t testing.TB, cfg daemon.Config) *daemon.Daemon {
	t.Helper()
	if cfg.Pool == nil && cfg.OpenDatabase == nil {
		cfg.Pool = pgtest.NewPool(t)
	}
	d, err := daemon.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start the daemon: %v", err)
	}
	d.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("shut the daemon down: %v", err)
		}
	})
	return d
}

// New starts a daemon of Config(t), changed by configure when not nil.
func New(t testing.TB, configure func(*daemon.Config)) *daemon.Daemon {
	t.Helper()
	cfg := Config(t)
	if configure != nil {
		configure(&cfg)
	}
	return Start(t, cfg)
}
