package main

import (
	"context"
	"log/slog"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/internal/daemon"
)

// run builds the daemon from the settings, serves until ctx ends, then
// shuts down in order (see daemon.Daemon.Shutdown).
func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	d, err := daemon.New(ctx, daemonConfig(cfg, log))
	if err != nil {
		return err
	}
	return d.Serve(ctx)
}

// daemonConfig maps the settings to the daemon's configuration; the
// database is the embedded cluster or the URL's server (cmd/internal/
// database), whose Postgres sessions are named for the next server's
// recovery and whose embedded cluster is supervised.
func daemonConfig(cfg *config.Config, log *slog.Logger) daemon.Config {
	return daemon.Config{
		DataDir:             cfg.DataDir,
		BinaryAddr:          cfg.BinaryAddr,
		HTTPAddr:            cfg.HTTPAddr,
		Mode:                cfg.Mode,
		AllowPublicDev:      cfg.AllowPublicDev,
		HTTPBodyLimit:       cfg.HTTPBodyLimit,
		ShutdownTimeout:     cfg.ShutdownTimeout,
		SweepInterval:       cfg.SweepInterval,
		DeletedRetention:    cfg.DeletedRetention,
		BlobClaimGrace:      cfg.BlobClaimGrace,
		RetentionIdle:       cfg.RetentionIdle,
		RetentionMaxAge:     cfg.RetentionMaxAge,
		RetentionShare:      cfg.RetentionShare,
		Pprof:               cfg.Pprof,
		AccessLog:           cfg.AccessLog,
		CardCacheBytes:      cfg.CardCacheBytes,
		RenderCacheBytes:    cfg.RenderCacheBytes,
		Analytics:           cfg.Analytics,
		AnalyticsMaxPayload: cfg.AnalyticsMaxPayload,
		MaxConns:            cfg.MaxConns,
		IdleTimeout:         cfg.IdleTimeout,
		WriteTimeout:        cfg.WriteTimeout,
		PGTimeout:           cfg.PGTimeout,
		SegmentSize:         cfg.SegmentSize,
		CompactionThreshold: cfg.CompactionThreshold,
		EraseWithin:         cfg.EraseWithin,
		CompactionRate:      cfg.CompactionRate,
		TenantRate:          cfg.TenantRate,
		TenantBurst:         cfg.TenantBurst,
		TenantMaxConns:      cfg.TenantMaxConns,
		TenantMemoryShare:   cfg.TenantMemoryShare,
		TenantQuotaBytes:    cfg.TenantQuotaBytes,
		TLSCert:             cfg.TLSCert,
		TLSKey:              cfg.TLSKey,
		TLSHandshakeTimeout: cfg.TLSHandshakeTimeout,
		OperatorKeyFile:     cfg.OperatorKeyFile,
		OpenDatabase: func(ctx context.Context, log *slog.Logger) (*daemon.Database, error) {
			return openDatabase(ctx, cfg, log)
		},
		Logger: log,
	}
}

// openDatabase opens the configured database for the daemon.
func openDatabase(ctx context.Context, cfg *config.Config, log *slog.Logger) (*daemon.Database, error) {
	db, err := database.Open(ctx, cfg, database.Options{NameSessions: true, Supervise: true, Logger: log})
	if err != nil {
		return nil, err
	}
	out := &daemon.Database{Pool: db.Pool, Background: db.Background, Record: db.RecordDatabase, Close: db.Close}
	if c := db.Collector(); c != nil {
		out.Collector = c
	}
	return out, nil
}
