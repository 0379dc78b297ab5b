// Package daemon builds cardbox's server from a configuration: the data
// directory's lock, the listeners (binary, HTTP, with TLS when set),
// Postgres, the turn store, the CXDB and CardBox services, SQL analytics,
// hosted mode's keys, rates and quotas, and the background work (sweeper,
// metadata extraction, projector, key and tenant watches). cmd/cardboxd
// serves with it, and so does every test that wants a whole server: a
// test server is the real server.
//
// A Daemon is made by New, serves after Start (or Serve), and stops with
// Shutdown, which ends every goroutine it started.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/cardboxhq/cardbox/api"
	"github.com/cardboxhq/cardbox/cardbox"
	"github.com/cardboxhq/cardbox/cardbox/sweep"
	"github.com/cardboxhq/cardbox/cxdbcompat/analytics"
	"github.com/cardboxhq/cardbox/cxdbcompat/server"
	"github.com/cardboxhq/cardbox/cxdbcompat/service"
	"github.com/cardboxhq/cardbox/cxdbcompat/turnpage"
	"github.com/cardboxhq/cardbox/internal/connlimit"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/ident"
	"github.com/cardboxhq/cardbox/internal/pace"
	"github.com/cardboxhq/cardbox/store"
	"github.com/cardboxhq/cardbox/store/metastore"
)

// Daemon is a cardbox server: everything cardboxd runs, built and owned.
type Daemon struct {
	cfg    Config
	log    *slog.Logger
	tlsCfg *tls.Config // nil: plain TCP

	binLn, httpLn *connlimit.Listener
	binServe      net.Listener // binLn, with TLS when set
	webServe      net.Listener
	db            *Database
	access        access
	engine        *store.Engine
	// commits and publishes tell the CXDB service and the projector of
	// committed turns and published bundles; New subscribes them.
	commits   feed[[]store.Appended]
	publishes feed[ident.Tenant]
	cxdb      *service.Service
	pages     *turnpage.Pages      // the CXDB service's turn pages as JSON
	proj      *analytics.Projector // nil with analytics off
	cards     *cardbox.Service
	sweeper   *sweep.Sweeper
	bin       *server.Server
	handler   *api.Handler
	web       *http.Server
	forget    *forgetter
	// compactions runs the compactions operators ask for.
	compactions *compactions
	// retentionPace is the share of the time (--retention-share) the
	// retention sweeper and the reaper of deleted contexts work together.
	retentionPace *pace.Budget

	// life ends at Shutdown: background work and event streams stop.
	life    context.Context
	end     context.CancelFunc
	work    sync.WaitGroup
	served  chan error // the listeners' Serve results
	started bool
	// closers close what New opened, run last to first by Shutdown (or
	// by New when it fails).
	closers  []func()
	shutOnce sync.Once
	shutErr  error
}

// New builds the daemon: it takes the data directory's lock (a second
// server on the same directory fails here, touching nothing), binds both
// listeners (a port clash fails before a cluster is initialised), opens
// Postgres, the store and the services. Nothing is served until Start.
func New(ctx context.Context, cfg Config) (_ *Daemon, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	// A bad certificate setting is found before anything is touched.
	tlsCfg, err := serverTLS(&cfg)
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger, tlsCfg: tlsCfg, served: make(chan error, 2), retentionPace: pace.NewBudget(cfg.RetentionShare)}
	d.life, d.end = context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			d.end()
			d.close()
		}
	}()
	if err := d.openFiles(ctx); err != nil {
		return nil, err
	}
	d.access = newAccess(&cfg, d.db.Pool, d.log)
	if err := d.access.ensureOperatorKey(ctx, &cfg, d.log); err != nil {
		return nil, err
	}
	if err := d.openStore(ctx); err != nil {
		return nil, err
	}
	d.buildServices()
	d.buildServers()
	return d, nil
}

// openFiles takes the data directory's lock, binds the listeners and
// opens the database, in that order.
func (d *Daemon) openFiles(ctx context.Context) error {
	cfg := &d.cfg
	lock, err := datadir.Acquire(cfg.DataDir, fmt.Sprintf("cardboxd serving %s and %s", cfg.BinaryAddr, cfg.HTTPAddr))
	if err != nil {
		return err
	}
	d.onClose(func() { lock.Unlock() })
	if d.binLn, d.httpLn, err = listen(cfg, d.tlsCfg != nil); err != nil {
		return err
	}
	d.onClose(func() { d.binLn.Close() })
	d.onClose(func() { d.httpLn.Close() })
	if d.db, err = d.openDatabase(ctx); err != nil {
		return err
	}
	d.onClose(d.closeDB)
	return nil
}

// openDatabase opens the configured database, or wraps Config.Pool.
func (d *Daemon) openDatabase(ctx context.Context) (*Database, error) {
	if d.cfg.OpenDatabase == nil {
		return &Database{Pool: d.cfg.Pool}, nil
	}
	db, err := d.cfg.OpenDatabase(ctx, d.log)
	if err != nil {
		return nil, err
	}
	return db, nil
}

// openStore opens the turn store, telling d.commits of its commits.
func (d *Daemon) openStore(ctx context.Context) error {
	engine, err := store.Open(ctx, store.Options{
		Dir: d.cfg.DataDir, Pool: d.db.Pool, Logger: d.log, OnAppend: d.commits.publish,
		Quota: d.access.storeQuota(), FSTree: DecodeFSTree, OnAppendPayloads: d.cfg.handedPayloads(), PGTimeout: d.cfg.PGTimeout,
		SegmentSize: d.cfg.SegmentSize, CompactionHook: d.cfg.Test.CompactionHook, BlobClaimGrace: d.cfg.BlobClaimGrace,
		ReapPace: d.retentionPace, CompactionLimiter: newCompactionLimiter(d.cfg.CompactionRate),
	})
	if err != nil {
		return err
	}
	d.engine = engine
	d.onClose(func() { engine.Close() })
	// The directory and the database are one store: commands and later
	// starts configured for another database refuse (docs/operations.md).
	if d.db.Record != nil {
		return d.db.Record(d.cfg.DataDir)
	}
	return nil
}

// buildServices makes the CXDB and CardBox services and the analytics
// projector, and subscribes them to the store's commits and the
// registry's publications. The store only commits once the listeners
// serve, after every subscription is made.
func (d *Daemon) buildServices() {
	cfg := &d.cfg
	var turns service.Store = d.engine
	if cfg.Test.WrapStore != nil {
		turns = cfg.Test.WrapStore(turns)
	}
	d.cxdb = service.New(turns, metastore.New(d.db.Pool, cfg.PGTimeout, d.engine), service.Options{
		Logger: d.log, OnPublish: d.publishes.publish, Now: cfg.Test.Now,
		DefaultRetention: store.DefaultRetention{Idle: cfg.RetentionIdle, MaxAge: cfg.RetentionMaxAge},
		RetentionPace:    d.retentionPace,
	})
	d.pages = turnpage.New(d.cxdb, cfg.RenderCacheBytes)
	d.cxdb.OnContextDeleted(d.pages.ForgetDeadTurns)
	d.commits.subscribe(d.cxdb.Appended)
	if cfg.Analytics {
		background := d.db.Background
		if background == nil {
			background = d.db.Pool
		}
		d.proj = analytics.New(analytics.Options{Source: d.cxdb, Pool: background, MaxPayload: cfg.AnalyticsMaxPayload, Logger: d.log})
		d.commits.subscribe(d.proj.Appended)
		d.publishes.subscribe(d.proj.Published)
	}
	d.cards, d.sweeper = newCardBox(cfg, d.db.Pool, d.access.cardboxAdmit(d.engine), d.log)
}

// Start serves both listeners and starts the background work. It returns
// at once; Shutdown stops it all.
func (d *Daemon) Start() {
	if d.started {
		return
	}
	d.started = true
	d.startBackground()
	go func() { d.served <- d.bin.Serve(d.binServe) }()
	go func() { d.served <- d.web.Serve(d.webServe) }()
	d.startWatches()
	d.log.Info("cardboxd serving", "mode", d.cfg.Mode, "binary", d.BinaryAddr(), "http", d.HTTPAddr(),
		"tls", d.tlsCfg != nil, "data_dir", d.cfg.DataDir)
}

// Serve starts the daemon, serves until ctx ends or a listener fails,
// then shuts down within Config.ShutdownTimeout.
func (d *Daemon) Serve(ctx context.Context) error {
	d.Start()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-d.served:
		d.served <- serveErr // for Shutdown, which waits for both
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
	defer cancel()
	return d.Shutdown(shutdownCtx)
}

// Shutdown stops in order: background work and event streams are told to
// end, the listeners stop taking work and finish in-flight requests
// (within ctx), the background work is waited for, the store answers its
// queued appends and closes its files, Postgres closes last. It returns
// what went wrong serving or stopping the listeners; later calls return
// the same.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.shutOnce.Do(func() { d.shutErr = d.shutdown(ctx) })
	return d.shutErr
}

func (d *Daemon) shutdown(ctx context.Context) error {
	d.end()
	var err error
	if d.started {
		d.log.Info("cardboxd shutting down")
		d.handler.CutArrivingBodies()
		err = errors.Join(d.bin.Shutdown(ctx), d.web.Shutdown(ctx))
		d.handler.FlushErrorLog() // the counts of HTTP errors not logged yet (the binary port's: its Shutdown)
		for range 2 {
			if serveErr := <-d.served; !errors.Is(serveErr, server.ErrServerClosed) && !errors.Is(serveErr, http.ErrServerClosed) {
				err = errors.Join(serveErr, err)
			}
		}
	}
	d.work.Wait()
	d.close()
	return err
}

// onClose adds f to what Shutdown closes, before what was added earlier.
func (d *Daemon) onClose(f func()) { d.closers = append(d.closers, f) }

// close runs the closers, last added first.
func (d *Daemon) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.closers = nil
}

func (d *Daemon) closeDB() {
	if d.db.Close == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
	defer cancel()
	if err := d.db.Close(ctx); err != nil {
		d.log.Error("stop postgres", "err", err)
	}
}

// goWork runs f until the daemon's life ends; Shutdown waits for it.
func (d *Daemon) goWork(f func(ctx context.Context)) {
	d.work.Go(func() { f(d.life) })
}
