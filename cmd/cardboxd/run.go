package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/store"
)

// run starts everything, serves until ctx ends, then shuts down in order:
// listeners stop taking work and finish in-flight requests, the store
// answers its queued appends and closes its files, Postgres stops last.
func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	db, err := database.Open(ctx, cfg, database.Options{NameSessions: true, Logger: log})
	if err != nil {
		return err
	}
	defer closeDB(db, cfg, log)

	engine, err := store.Open(ctx, store.Options{Dir: cfg.DataDir, Pool: db.Pool, Logger: log})
	if err != nil {
		return err
	}
	defer engine.Close()

	binLn, err := net.Listen("tcp", cfg.BinaryAddr)
	if err != nil {
		return fmt.Errorf("binary listener: %w", err)
	}
	httpLn, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		binLn.Close()
		return fmt.Errorf("http listener: %w", err)
	}
	routes, stopBackground := domainRoutes(ctx, cfg, db, log)
	defer stopBackground()

	bin := server.New(server.Options{Store: engine, Logger: log})
	web := &http.Server{
		Handler: api.New(api.Options{
			Health: engine, Routes: routes, BodyLimit: cfg.HTTPBodyLimit,
			Metrics: api.NewRegistry(engine), Pprof: cfg.Pprof, Logger: log,
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	errc := make(chan error, 2)
	go func() { errc <- bin.Serve(binLn) }()
	go func() { errc <- web.Serve(httpLn) }()
	log.Info("cardboxd serving", "binary", binLn.Addr().String(), "http", httpLn.Addr().String(), "data_dir", cfg.DataDir)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	log.Info("cardboxd shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	err = errors.Join(bin.Shutdown(shutdownCtx), web.Shutdown(shutdownCtx))
	if errors.Is(serveErr, server.ErrServerClosed) || errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return errors.Join(serveErr, err)
}

func closeDB(db *database.DB, cfg *config.Config, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := db.Close(ctx); err != nil {
		log.Error("stop postgres", "err", err)
	}
}
