package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/cmd/internal/database"
	"github.com/cardboxhq/cardbox/cxdbcompat/analytics"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/connlimit"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/store"
)

// run starts everything, serves until ctx ends, then shuts down in order:
// listeners stop taking work and finish in-flight requests, the store
// answers its queued appends and closes its files, Postgres stops last.
//
// Before anything else it takes the data directory's lock (a second server
// on the same directory exits here, touching nothing) and binds both
// listeners (a port clash fails before a cluster is initialised).
func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	if err := checkMode(cfg); err != nil {
		return err
	}
	// A bad certificate setting is found before anything is touched.
	tlsCfg, err := serverTLS(cfg)
	if err != nil {
		return err
	}
	lock, err := datadir.Acquire(cfg.DataDir, fmt.Sprintf("cardboxd serving %s and %s", cfg.BinaryAddr, cfg.HTTPAddr))
	if err != nil {
		return err
	}
	defer lock.Unlock()
	binLn, httpLn, err := listen(cfg, tlsCfg != nil)
	if err != nil {
		return err
	}
	defer binLn.Close()
	defer httpLn.Close()

	db, err := database.Open(ctx, cfg, database.Options{NameSessions: true, Supervise: true, Logger: log})
	if err != nil {
		return err
	}
	defer closeDB(db, cfg, log)

	access := newAccess(cfg, db.Pool, log)
	if err := access.ensureOperatorKey(ctx, cfg, log); err != nil {
		return err
	}
	// The CXDB service and the analytics projector hear of every committed
	// turn; the store only commits once the listeners serve, after both
	// are set.
	var svc *service.Service
	var proj *analytics.Projector
	engine, err := store.Open(ctx, store.Options{
		Dir: cfg.DataDir, Pool: db.Pool, Logger: log, OnAppend: func(a []store.Appended) {
			svc.Appended(a)
			if proj != nil {
				proj.Appended(a)
			}
		},
		Quota: access.storeQuota(), OnAppendPayloads: handedPayloads(cfg), PGTimeout: cfg.PGTimeout,
	})
	if err != nil {
		return err
	}
	defer engine.Close()
	// The directory and the database are one store: commands and later
	// starts configured for another database refuse (docs/operations.md).
	if err := db.RecordDatabase(cfg.DataDir); err != nil {
		return err
	}
	svcOpts := service.Options{Logger: log, RenderCacheBytes: cfg.RenderCacheBytes}
	if cfg.Analytics {
		svcOpts.OnPublish = func(t store.Tenant) { proj.Published(t) }
	}
	svc = service.New(engine, svcOpts)
	if cfg.Analytics {
		proj = analytics.New(analytics.Options{Source: svc, Pool: db.Background, MaxPayload: cfg.AnalyticsMaxPayload, Logger: log})
	}

	routes, cards, stopBackground := domainRoutes(ctx, cfg, db, svc, proj, access.cardboxAdmit(engine), log)
	defer stopBackground()
	bin := server.New(server.Options{
		Store: svc, Live: svc.Hub(), Logger: log, IdleTimeout: cfg.IdleTimeout, WriteTimeout: cfg.WriteTimeout,
		Authenticate: access.binary(), Limit: access.limit(), MaxSessionsPerTenant: cfg.TenantMaxConns,
		TenantShare: access.memoryShare(cfg),
	})
	httpMetrics := api.NewHTTPMetrics()
	listeners := connlimit.NewCollector(map[string]*connlimit.Listener{"binary": binLn, "http": httpLn})
	collectors := []prometheus.Collector{httpMetrics, listeners, bin.Collector()}
	if proj != nil {
		collectors = append(collectors, proj)
	}
	if c := db.Collector(); c != nil {
		collectors = append(collectors, c) // the embedded cluster's restarts and free space
	}
	metrics := api.NewRegistry(engine, collectors...)
	// Large HTTP answers share the binary port's answer budget.
	routes = append(routes, api.CXDB(svc, api.CXDBOptions{Stop: ctx.Done(), Stats: engine, DataDir: cfg.DataDir, Gatherer: metrics, Answers: bin.ReplyBudget()}))
	if access.keys != nil {
		routes = append(routes, api.Admin(access.keys).WithUsage(access.usage(engine)))
	}
	deadlines := api.DefaultDeadlines
	deadlines.Write = cfg.WriteTimeout
	handler := api.New(api.Options{
		Health: engine, Routes: routes, BodyLimit: cfg.HTTPBodyLimit,
		Metrics: metrics, HTTPMetrics: httpMetrics,
		AccessLog: cfg.AccessLog, Deadlines: deadlines, Pprof: cfg.Pprof, Logger: log, Auth: access.http(), Limit: access.limit(),
	})
	web := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	var binServe, webServe net.Listener = binLn, httpLn
	if tlsCfg != nil {
		binTLS, webTLS := secure(binLn, httpLn, tlsCfg, cfg, log)
		defer binTLS.Close()
		defer webTLS.Close()
		binServe, webServe = binTLS, webTLS
	}
	errc := make(chan error, 2)
	go func() { errc <- bin.Serve(binServe) }()
	go func() { errc <- web.Serve(webServe) }()
	forget := &forgetter{
		admin: auth.NewKeys(db.Pool, log), engine: engine, cxdb: svc, cards: cards, bin: bin,
		limiter: access.limiter, log: log,
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	watchers.Go(func() { access.watch(watchCtx, bin, log) })
	watchers.Go(func() { forget.watch(watchCtx) })
	defer func() { stopWatch(); watchers.Wait() }()
	log.Info("cardboxd serving", "mode", cfg.Mode, "binary", binLn.Addr().String(), "http", httpLn.Addr().String(),
		"tls", tlsCfg != nil, "data_dir", cfg.DataDir)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	log.Info("cardboxd shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	handler.CutArrivingBodies()
	err = errors.Join(bin.Shutdown(shutdownCtx), web.Shutdown(shutdownCtx))
	handler.FlushErrorLog() // the counts of HTTP errors not logged yet (the binary port's: its Shutdown)
	if errors.Is(serveErr, server.ErrServerClosed) || errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return errors.Join(serveErr, err)
}

// listen opens both listeners with the connection limit; a connection
// over it is refused with a message in the listener's protocol, or, with
// TLS, closed without one: a plaintext message would not reach a TLS
// client, and answering in TLS would take a handshake just when the
// server is busiest.
func listen(cfg *config.Config, withTLS bool) (binLn, httpLn *connlimit.Listener, err error) {
	b, err := net.Listen("tcp", cfg.BinaryAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("binary listener: %w", err)
	}
	h, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		b.Close()
		return nil, nil, fmt.Errorf("http listener: %w", err)
	}
	binRefuse, httpRefuse := server.RefuseConn, api.RefuseConn
	if withTLS {
		binRefuse, httpRefuse = nil, nil
	}
	binLn = connlimit.New(b, connlimit.Options{Max: cfg.MaxConns, Refuse: binRefuse})
	httpLn = connlimit.New(h, connlimit.Options{Max: cfg.MaxConns, Refuse: httpRefuse})
	return binLn, httpLn, nil
}

func closeDB(db *database.DB, cfg *config.Config, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := db.Close(ctx); err != nil {
		log.Error("stop postgres", "err", err)
	}
}

// handedPayloads is the largest payload the store hands the analytics
// projector with its turn, which the projector would otherwise read back
// from the blob pack and decompress: up to 64 KiB, none with analytics
// off.
func handedPayloads(cfg *config.Config) int {
	if !cfg.Analytics {
		return 0
	}
	return int(min(cfg.AnalyticsMaxPayload, 64<<10))
}
