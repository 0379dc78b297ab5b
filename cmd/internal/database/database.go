// Package database connects cardbox to Postgres: the server at
// CARDBOX_DATABASE_URL, or an embedded cluster in the data directory when no
// URL is set. It applies the migrations before handing out the pool.
package database

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/internal/pgembed"
	"github.com/cardboxhq/cardbox/migrations"
	"github.com/cardboxhq/cardbox/store"
)

// embeddedDB is the database cardbox uses inside its embedded cluster.
const embeddedDB = "cardbox"

// embeddedSettings tune the private cluster for an append-heavy load
// without weakening durability (fsync and synchronous_commit stay on).
var embeddedSettings = map[string]string{
	"shared_buffers":     "256MB",
	"max_connections":    "100",
	"wal_level":          "minimal",
	"max_wal_senders":    "0",
	"max_wal_size":       "4GB",
	"checkpoint_timeout": "15min",
	"wal_buffers":        "16MB",
	"synchronous_commit": "on",
	"fsync":              "on",
}

// DB is an open, migrated database.
type DB struct {
	Pool     *pgxpool.Pool
	embedded *pgembed.Server
	stopPG   bool
}

// Options say how to open the database.
type Options struct {
	// KeepEmbedded leaves an embedded cluster running on Close if it was
	// already running when Open found it (the CLI uses this so that it does
	// not stop a server's database).
	KeepEmbedded bool
	// NameSessions names this process's Postgres sessions with
	// store.SessionName, for the server: its turn store's recovery ends the
	// sessions of other processes so named. The CLI leaves its sessions
	// unnamed, so that a server starting meanwhile does not end them.
	NameSessions bool
	Logger       *slog.Logger
}

// Open connects (starting the embedded cluster if no URL is configured) and
// migrates.
func Open(ctx context.Context, cfg *config.Config, opts Options) (*DB, error) {
	d := &DB{}
	url := cfg.DatabaseURL
	if url == "" {
		srv, err := pgembed.Start(ctx, pgembed.Options{
			Dir: filepath.Join(cfg.DataDir, "postgres"), BinDir: cfg.PGBinDir,
			Settings: embeddedSettings, Logger: opts.Logger,
		})
		if err != nil {
			return nil, err
		}
		d.embedded, d.stopPG = srv, srv.Started() || !opts.KeepEmbedded
		if err := srv.EnsureDatabase(ctx, embeddedDB); err != nil {
			d.Close(ctx)
			return nil, err
		}
		url = srv.URL(embeddedDB)
	}
	if err := d.connect(ctx, url, opts.NameSessions); err != nil {
		d.Close(ctx)
		return nil, err
	}
	return d, nil
}

func (d *DB) connect(ctx context.Context, url string, nameSessions bool) error {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("CARDBOX_DATABASE_URL: %w", err)
	}
	pcfg.MaxConns = 32
	pcfg.MaxConnIdleTime = 5 * time.Minute
	if nameSessions {
		// So that the next server's recovery can end them if this one dies
		// with transactions open.
		pcfg.ConnConfig.RuntimeParams["application_name"] = store.SessionName()
	}
	if d.Pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.Pool.Ping(pingCtx); err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	return migrations.Up(ctx, d.Pool)
}

// Close closes the pool and stops the embedded cluster if this process
// owns it.
func (d *DB) Close(ctx context.Context) error {
	if d.Pool != nil {
		d.Pool.Close()
	}
	if d.embedded != nil && d.stopPG {
		return d.embedded.Stop(ctx)
	}
	return nil
}
