// Package database connects cardbox to Postgres: the server at
// CARDBOX_DATABASE_URL, or an embedded cluster in the data directory when no
// URL is set. It applies the migrations before handing out the pool.
package database

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/internal/datadir"
	"github.com/cardboxhq/cardbox/internal/pgembed"
	"github.com/cardboxhq/cardbox/internal/pgrole"
	"github.com/cardboxhq/cardbox/migrations"
	"github.com/cardboxhq/cardbox/store"
)

// EmbeddedDB is the database cardbox uses inside its embedded cluster.
const EmbeddedDB = "cardbox"

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
	// JIT compiling a query costs hundreds of milliseconds, and Postgres
	// decides on it from cost estimates, which stale statistics inflate
	// (after a bulk load or a migration): the analytics views' queries
	// (docs/analytics.md) took 0.7 s instead of 12 ms.
	"jit": "off",
}

// DB is an open, migrated database.
type DB struct {
	Pool *pgxpool.Pool
	// Background is a small pool, like Pool, for work that must yield the
	// CPU to requests (the analytics projector): in the embedded cluster
	// its backends run at a lower CPU priority (backgroundNice).
	Background *pgxpool.Pool
	// embedded is the data directory's cluster, which the caller owns by
	// holding the directory's lock (see internal/datadir): Close stops it,
	// whether Open started it or adopted it from a process that died.
	embedded *pgembed.Server
	guest    bool // embedded belongs to a running server: leave it running
	log      *slog.Logger
	// location is where the database is, for the data directory's record
	// of it (RecordDatabase).
	location datadir.Database
	// stopWatch ends the watch on the embedded cluster; watchDone closes
	// when it has.
	stopWatch  context.CancelFunc
	watchDone  chan struct{}
	supervisor *supervisor
}

// Options say how to open the database.
type Options struct {
	// Supervise restarts an embedded cluster whose postmaster dies, with
	// backoff, or as soon as there is space when its disk is full
	// (supervisor), until Close (the server sets it).
	Supervise bool
	// NameSessions names this process's Postgres sessions with
	// store.SessionName, for the server: its turn store's recovery ends the
	// sessions of other processes so named. The CLI leaves its sessions
	// unnamed, so that a server starting meanwhile does not end them.
	NameSessions bool
	// Guest uses the embedded cluster of a server that holds the data
	// directory's lock and is running, for the administration commands
	// (keys, tenants) that work beside it: Close leaves the cluster
	// running, and it is used as it runs, whatever --sql-addr says.
	Guest bool
	// Owner keeps the pool as the URL's role, the schema's owner, rather
	// than pgrole.Server: for commands that read the migrations' state or
	// make Postgres roles.
	Owner  bool
	Logger *slog.Logger
}

// Open connects (starting or adopting the embedded cluster if no URL is
// configured) and migrates. With no URL the caller must hold the data
// directory's lock, or be a guest of the server that does.
func Open(ctx context.Context, cfg *config.Config, opts Options) (*DB, error) {
	d := &DB{log: opts.Logger}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	url := cfg.DatabaseURL
	if url != "" && cfg.SQLAddr != "" {
		return nil, errors.New("--sql-addr is for the embedded Postgres; with --database-url, give analysts access on that server instead (see docs/security.md)")
	}
	// Before anything starts: the data directory's store may live in
	// another database (location.go).
	check, err := checkDataDir(cfg)
	if err != nil {
		return nil, err
	}
	d.location = check.target
	if url == "" {
		srv, err := pgembed.Start(ctx, pgembed.Options{
			Dir: filepath.Join(cfg.DataDir, "postgres"), BinDir: cfg.PGBinDir,
			Settings: embeddedSettings, Logger: opts.Logger,
			TCPAddr: cfg.SQLAddr, Join: opts.Guest,
		})
		if err != nil {
			return nil, err
		}
		if opts.Guest && !srv.Started() {
			d.guest = true
		}
		d.embedded = srv
		if err := srv.EnsureDatabase(ctx, EmbeddedDB); err != nil {
			d.Close(ctx)
			return nil, err
		}
		url = srv.URL(EmbeddedDB)
	}
	if err := d.connect(ctx, url, check, opts); err != nil {
		d.Close(ctx)
		return nil, err
	}
	if d.embedded != nil && opts.Supervise {
		d.watch()
	}
	return d, nil
}

// SQLAddr is the loopback TCP address the embedded cluster listens on for
// analysts' SQL roles: as the running cluster's postmaster.pid records it
// when this process joined a server's cluster (Options.Guest), else as
// started. It is "" for the socket only, and with a database URL.
func (d *DB) SQLAddr() string {
	if d.embedded == nil {
		return ""
	}
	return d.embedded.TCPAddr()
}

// watch starts the goroutine that restarts the embedded cluster when its
// postmaster dies (supervisor); Close stops it.
func (d *DB) watch() {
	ctx, cancel := context.WithCancel(context.Background())
	d.stopWatch, d.watchDone = cancel, make(chan struct{})
	d.supervisor = newSupervisor(d.embedded, d.log)
	go func() {
		defer close(d.watchDone)
		d.supervisor.run(ctx)
	}()
}

// Collector is the embedded cluster's metrics: its restarts, whether it
// waits for space, the free space of its file system
// (cardbox_embedded_postgres_*). It is nil unless this process supervises
// an embedded cluster (Options.Supervise).
func (d *DB) Collector() prometheus.Collector {
	if d.supervisor == nil {
		return nil
	}
	return d.supervisor
}

// wait sleeps for d unless ctx ends first; it reports whether ctx is live.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// connect migrates as the URL's role, which owns the schema, and opens
// the pool the rest of the process uses, which runs as pgrole.Server: no
// privileges of its own, every statement taking its path's role
// (internal/pgrole), so that row-level security applies. The embedded
// cluster logs in as that role; a server at a URL keeps the URL's login
// and switches to it on each connection.
func (d *DB) connect(ctx context.Context, url string, check dataDirCheck, opts Options) error {
	if err := migrate(ctx, url, check, d.embedded != nil); err != nil {
		return err
	}
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("CARDBOX_DATABASE_URL: %w", err)
	}
	pcfg.MaxConns = 32
	pcfg.MaxConnIdleTime = 5 * time.Minute
	if opts.NameSessions {
		// So that the next server's recovery can end them if this one dies
		// with transactions open.
		pcfg.ConnConfig.RuntimeParams["application_name"] = store.SessionName()
	}
	switch {
	case opts.Owner:
	case d.embedded != nil:
		pcfg.ConnConfig.User = pgrole.Server
	default:
		pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			_, err := c.Exec(ctx, "SET ROLE "+pgrole.Server)
			return err
		}
	}
	if d.Pool, err = open(ctx, pcfg); err != nil {
		return err
	}
	if d.Background, err = open(ctx, d.backgroundConfig(pcfg)); err != nil {
		return err
	}
	return nil
}

// backgroundNice is the nice value of the embedded cluster's backends
// serving DB.Background: under a full load they get a small share of the
// CPU beside the requests' backends (nice 0), and all of it when idle.
const backgroundNice = 10

// backgroundConfig returns the configuration of DB.Background: Pool's,
// with two connections, whose backends in the embedded cluster are
// reniced. A server at a URL may run elsewhere, where its process ids
// mean nothing here: its backends keep their priority.
func (d *DB) backgroundConfig(pcfg *pgxpool.Config) *pgxpool.Config {
	bcfg := pcfg.Copy()
	bcfg.MaxConns = 2
	if d.embedded == nil {
		return bcfg
	}
	after := pcfg.AfterConnect
	bcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, c); err != nil {
				return err
			}
		}
		if err := renice(int(c.PgConn().PID()), backgroundNice); err != nil {
			d.log.Warn("background Postgres session keeps its CPU priority", "pid", c.PgConn().PID(), "err", err)
		}
		return nil
	}
	return bcfg
}

// migrate applies the migrations as the URL's role, once the database is
// seen to hold the data directory's store if check asks, and, in the
// embedded cluster, lets pgrole.Server log in (over the cluster's private
// socket).
func migrate(ctx context.Context, url string, check dataDirCheck, embedded bool) error {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("CARDBOX_DATABASE_URL: %w", err)
	}
	pcfg.MaxConns = 2
	owner, err := open(ctx, pcfg)
	if err != nil {
		return err
	}
	defer owner.Close()
	if err := check.confirmStore(ctx, owner); err != nil {
		return err
	}
	if err := migrations.Up(ctx, owner); err != nil {
		return err
	}
	if embedded {
		if _, err := owner.Exec(ctx, "ALTER ROLE "+pgrole.Server+" LOGIN"); err != nil {
			return fmt.Errorf("let %s log in: %w", pgrole.Server, err)
		}
	}
	return nil
}

// open opens a pool and checks that it reaches Postgres.
func open(ctx context.Context, pcfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to postgres as %s: %w", pcfg.ConnConfig.User, err)
	}
	return pool, nil
}

// Close closes the pool and stops the embedded cluster if this process
// owns it.
func (d *DB) Close(ctx context.Context) error {
	if d.stopWatch != nil {
		d.stopWatch()
		<-d.watchDone
	}
	if d.Background != nil {
		d.Background.Close()
	}
	if d.Pool != nil {
		d.Pool.Close()
	}
	if d.embedded != nil && !d.guest {
		return d.embedded.Stop(ctx)
	}
	return nil
}
