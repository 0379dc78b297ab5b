// Package pgembed runs a private PostgreSQL cluster from the machine's
// PostgreSQL binaries inside a directory the caller owns.
//
// The cluster listens on a unix socket, in a directory private to the user
// that runs postgres, where it trusts every local role. Optionally it also
// listens on one loopback TCP address, where every role must give its
// password (SCRAM); nothing outside the machine can reach it either way.
// pg_hba.conf is rewritten at every start to say exactly that. When the
// calling process is root, postgres runs as an unprivileged user
// (postgres, else nobody), because the server refuses to run as root.
//
// A second Start on the same directory reuses the cluster, and reuses a
// server that is still running there (for example after the previous owner
// was killed), restarting it if it listens elsewhere than asked.
package pgembed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Superuser is the role initdb creates; the embedded cluster trusts it on
// its private socket.
const Superuser = "cardbox"

// Options configure an embedded cluster.
type Options struct {
	// Dir holds the cluster: Dir/pgdata, Dir/run (socket), Dir/postgres.log.
	Dir string
	// BinDir overrides the search for initdb, pg_ctl and postgres.
	BinDir string
	// Settings are extra postgresql.conf parameters passed at start.
	Settings map[string]string
	// TCPAddr, if set, is a loopback IP address and port (127.0.0.1:5433)
	// where postgres also listens, for roles with a password; anything
	// else is refused (ErrNotLoopback). The socket takes the same port.
	TCPAddr string
	// Join uses a cluster that another process (the server owning the
	// directory) runs as it runs, whatever its listener: Start never
	// restarts it.
	Join bool
	// Logger receives progress messages; nil discards them.
	Logger *slog.Logger
}

// Server is a running embedded cluster.
type Server struct {
	dir      string
	bins     *binaries
	sockDir  string
	user     *runAs
	log      *slog.Logger
	settings map[string]string
	lis      listener // where postgres listens (or, joined, listened)
	started  bool     // this Start started postgres (it was not already running)
}

// Start initialises the cluster if needed, starts it unless it already runs,
// and waits until it accepts connections.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bins, err := findBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	lis, err := parseListener(opts.TCPAddr)
	if err != nil {
		return nil, err
	}
	user, err := unprivilegedUser()
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bins: bins, sockDir: socketDir(dir), user: user, log: opts.Logger, settings: opts.Settings, lis: lis}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.prepareDirs(); err != nil {
		return nil, err
	}
	if err := s.initdb(ctx); err != nil {
		return nil, err
	}
	hbaChanged, err := s.writeHBA()
	if err != nil {
		return nil, err
	}
	if adopted, err := s.adopt(ctx, opts.Join, hbaChanged); adopted || err != nil {
		return s, err
	}
	if err := s.start(ctx, opts.Settings); err != nil {
		return nil, err
	}
	s.started = true
	return s, s.waitReady(ctx)
}

// adopt uses a postmaster already running on the cluster, found through
// the port its postmaster.pid records. A joined one is used as it runs;
// otherwise one listening elsewhere than asked is stopped (and adopt
// reports false, so that Start starts it as asked).
func (s *Server) adopt(ctx context.Context, join, hbaChanged bool) (bool, error) {
	want := s.lis
	if rec, ok := s.recordedListener(); ok {
		s.lis = rec
	}
	if s.ping(ctx) != nil {
		s.lis = want
		return false, nil
	}
	if join || s.lis == want {
		s.log.Info("embedded postgres already running", "dir", s.dataDir(), "tcp", s.lis.addr())
		if hbaChanged {
			return true, s.reload(ctx)
		}
		return true, nil
	}
	s.log.Info("embedded postgres running with another listener; restarting it",
		"dir", s.dataDir(), "tcp", s.lis.addr(), "want_tcp", want.addr())
	if err := s.Stop(ctx); err != nil {
		return false, err
	}
	s.lis = want
	return false, nil
}

// reload makes the running postmaster read pg_hba.conf again.
func (s *Server) reload(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("embedded postgres: reload: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("embedded postgres: reload: %w", err)
	}
	return nil
}

// TCPAddr is the loopback address postgres listens on for roles with a
// password, or "" when it listens on its socket only.
func (s *Server) TCPAddr() string { return s.lis.addr() }

// Running reports whether the cluster's postmaster is running (pg_ctl
// status), whether or not it answers.
func (s *Server) Running(ctx context.Context) bool {
	_, err := s.run(ctx, s.bins.pgCtl, "status", "-D", s.dataDir())
	return err == nil
}

// Ping checks that the cluster accepts connections, within 2 s.
func (s *Server) Ping(ctx context.Context) error { return s.ping(ctx) }

// Restart starts the cluster again after its postmaster died (crashed or
// was killed), with the settings of Start, and waits until it is ready.
func (s *Server) Restart(ctx context.Context) error {
	if s.Running(ctx) {
		return s.waitReady(ctx)
	}
	if err := s.start(ctx, s.settings); err != nil {
		return err
	}
	return s.waitReady(ctx)
}

// Started reports whether Start started postgres rather than finding it
// already running.
func (s *Server) Started() bool { return s.started }

// EnsureDatabase creates database name unless it exists.
func (s *Server) EnsureDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("embedded postgres: %w", err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("embedded postgres: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("embedded postgres: create database %s: %w", name, err)
	}
	return nil
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "pgdata") }
func (s *Server) logFile() string { return filepath.Join(s.dir, "postgres.log") }

// URL is a connection string for database db on the cluster's socket.
func (s *Server) URL(db string) string {
	q := url.Values{"host": {s.sockDir}, "port": {strconv.Itoa(s.lis.port)}, "user": {Superuser}, "sslmode": {"disable"}}
	return "postgres:///" + url.PathEscape(db) + "?" + q.Encode()
}

// Stop shuts the cluster down (fast mode: active sessions are ended, the
// checkpoint completes) and waits for it.
func (s *Server) Stop(ctx context.Context) error {
	out, err := s.run(ctx, s.bins.pgCtl, "stop", "-D", s.dataDir(), "-m", "fast", "-w", "-t", "60")
	if err != nil {
		return fmt.Errorf("embedded postgres: stop: %w: %s", err, out)
	}
	return nil
}

func (s *Server) prepareDirs() error {
	if s.user != nil {
		// Parents this creates (the data directory, typically) must let the
		// postgres user pass through; 0711 lets it enter without listing.
		if err := os.MkdirAll(filepath.Dir(s.dir), 0o711); err != nil {
			return fmt.Errorf("embedded postgres: %w", err)
		}
	}
	for _, d := range []string{s.dir, s.sockDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("embedded postgres: %w", err)
		}
		if err := s.user.own(d); err != nil {
			return err
		}
	}
	return s.user.checkTraversable(s.dir)
}

func (s *Server) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(s.dataDir(), "PG_VERSION")); err == nil {
		return nil
	}
	s.log.Info("initialising embedded postgres", "dir", s.dataDir())
	// A half-finished initdb leaves a directory that a retry cannot use.
	_ = os.RemoveAll(s.dataDir())
	out, err := s.run(ctx, s.bins.initdb, "-D", s.dataDir(), "-U", Superuser,
		"--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8")
	if err != nil {
		return fmt.Errorf("embedded postgres: initdb: %w: %s", err, out)
	}
	return nil
}

func (s *Server) start(ctx context.Context, settings map[string]string) error {
	var opts []string
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		opts = append(opts, "-c", k+"="+settings[k])
	}
	// Last, so that no setting widens the listener or weakens passwords.
	opts = append(opts, "-k", s.sockDir, "-p", strconv.Itoa(s.lis.port), "-c", "listen_addresses="+s.lis.host,
		"-c", "hba_file="+filepath.Join(s.dataDir(), "pg_hba.conf"), "-c", "password_encryption=scram-sha-256")
	s.log.Info("starting embedded postgres", "dir", s.dataDir(), "socket", s.sockDir, "tcp", s.lis.addr())
	out, err := s.run(ctx, s.bins.pgCtl, "start", "-D", s.dataDir(), "-l", s.logFile(),
		"-w", "-t", "60", "-o", shellJoin(opts))
	if err != nil {
		return fmt.Errorf("embedded postgres: start: %w: %s\n%s", err, out, tail(s.logFile(), 2000))
	}
	return nil
}

func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.ping(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("embedded postgres: not ready after 30s: %w\n%s", err, tail(s.logFile(), 2000))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// run executes a PostgreSQL tool as the unprivileged user, in its own
// process group so that a terminal's Ctrl-C reaches only cardboxd, which
// then stops the cluster in order.
func (s *Server) run(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
	cmd.SysProcAttr = s.user.sysProcAttr()
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// socketDir keeps the socket path under the kernel's 107-byte limit: a long
// data directory gets a fixed, private directory in /tmp named after it.
func socketDir(dir string) string {
	d := filepath.Join(dir, "run")
	if len(d)+len("/.s.PGSQL.5432") < 100 {
		return d
	}
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(os.TempDir(), "cardbox-pg-"+hex.EncodeToString(sum[:6]))
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}

// ErrNotInstalled means no PostgreSQL server binaries were found.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: " +
	"install them (Debian/Ubuntu: apt-get install -y postgresql; Fedora: dnf install postgresql-server; " +
	"macOS: brew install postgresql@16), point CARDBOX_PG_BINDIR at their directory, " +
	"or set CARDBOX_DATABASE_URL to an existing PostgreSQL server")
