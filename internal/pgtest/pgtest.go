// Package pgtest gives tests real, isolated PostgreSQL databases.
//
// A test binary calls Main from TestMain. When CARDBOX_TEST_DATABASE_URL is
// unset, Main starts a private embedded cluster (package pgembed) in a
// temporary directory for the whole binary and stops it afterwards; when it
// is set, databases are created on that server (the role needs CREATEDB,
// and CREATEROLE when it is a superuser: see below).
//
// Databases are owned the way a managed Postgres owns cardbox's: by a role
// that is not superuser, does not bypass row-level security and may create
// roles (docs/operations.md). The superuser of the test server only makes
// that role (one per test binary) and the databases; the migrations, the
// pools and the URLs tests get log in as the owner, so every test runs
// what production runs at a URL. CARDBOX_TEST_SUPERUSER_OWNER=1 keeps the
// old way (the server's superuser owns and uses everything); a test that
// needs the superuser itself asks for SuperuserURL or SuperuserPool. When
// CARDBOX_TEST_DATABASE_URL names a role that is not superuser, that role
// is the owner.
//
// Like River's riverdbtest, the cheap default is a transaction that is
// rolled back when the test ends (Tx); a test that commits, or runs a
// server, takes a fresh database of its own (NewDB). Both start from a
// template database migrated once per binary.
package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"log"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/pgembed"
	"github.com/cardboxhq/cardbox/migrations"
)

// EnvURL names the variable that points tests at an existing server.
const EnvURL = "CARDBOX_TEST_DATABASE_URL"

// EnvSuperuserOwner, set to 1, makes the test server's superuser own the
// databases and log in for the tests, as before non-superuser owners.
const EnvSuperuserOwner = "CARDBOX_TEST_SUPERUSER_OWNER"

var (
	baseURL  string // a URL on the test server; the database part is replaced
	ownerURL string // baseURL as the databases' owner (baseURL itself in superuser mode)
	owner    string // the owner role this binary made ("" when baseURL's role owns the databases)
	// superuserOwner: baseURL's role, a superuser, owns the databases
	// (CARDBOX_TEST_SUPERUSER_OWNER=1)
	superuserOwner bool
	template       string // migrated template database
	seq            atomic.Int64

	sharedOnce sync.Once
	sharedPool *pgxpool.Pool
	sharedErr  error
)

// Main prepares the server and the template, runs the tests, cleans up and
// exits.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	stop, err := setup(ctx)
	if err != nil {
		log.Printf("pgtest: %v", err)
		return 1
	}
	code := m.Run()
	if sharedPool != nil {
		sharedPool.Close()
		sharedCleanup(ctx)
	}
	if err := stop(ctx); err != nil {
		log.Printf("pgtest: cleanup: %v", err)
	}
	return code
}

func setup(ctx context.Context) (stop func(context.Context) error, err error) {
	stop = func(context.Context) error { return nil }
	baseURL = os.Getenv(EnvURL)
	if baseURL == "" {
		srv, dir, err := startEmbedded(ctx)
		if err != nil {
			return stop, err
		}
		baseURL = srv.URL("postgres")
		stop = func(ctx context.Context) error {
			defer os.RemoveAll(dir)
			return srv.Stop(ctx)
		}
	}
	template = fmt.Sprintf("cardbox_tpl_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	ownerURL = baseURL
	superuserOwner = os.Getenv(EnvSuperuserOwner) == "1"
	if !superuserOwner {
		dropOwner, err := createOwner(ctx)
		if err != nil {
			_ = stop(ctx)
			return stop, err
		}
		prev := stop
		stop = func(ctx context.Context) error {
			dropOwner(ctx)
			return prev(ctx)
		}
	}
	if err := createTemplate(ctx); err != nil {
		_ = stop(ctx)
		return stop, err
	}
	prev := stop
	stop = func(ctx context.Context) error {
		_ = dropDB(ctx, template)
		return prev(ctx)
	}
	return stop, nil
}

// OwnerAttributes are the role attributes of the databases' owner, those
// of the owner a managed Postgres gives cardbox (docs/operations.md).
const OwnerAttributes = "LOGIN NOSUPERUSER CREATEROLE NOCREATEDB NOBYPASSRLS"

// createOwner makes the binary's owner role, with a random password (a
// server at CARDBOX_TEST_DATABASE_URL may ask for one), and points
// ownerURL at it; when baseURL's role is not a superuser, it is the owner
// as it is. The returned function drops the role once the databases are
// gone.
func createOwner(ctx context.Context) (drop func(context.Context), err error) {
	drop = func(context.Context) {}
	conn, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return drop, fmt.Errorf("pgtest: connect: %w", err)
	}
	defer conn.Close(ctx)
	var super bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
		return drop, fmt.Errorf("pgtest: %w", err)
	}
	if !super {
		return drop, nil
	}
	owner = template + "_owner"
	password := rand.Text()
	if _, err := conn.Exec(ctx, "CREATE ROLE "+pgx.Identifier{owner}.Sanitize()+" "+OwnerAttributes+
		" PASSWORD '"+password+"'"); err != nil {
		return drop, fmt.Errorf("pgtest: create the owner role: %w", err)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return drop, fmt.Errorf("pgtest: bad %s: %w", EnvURL, err)
	}
	u.User = url.UserPassword(owner, password)
	q := u.Query() // pgembed's URL names its superuser in the query
	q.Del("user")
	q.Del("password")
	u.RawQuery = q.Encode()
	ownerURL = u.String()
	return func(ctx context.Context) {
		_ = admin(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{owner}.Sanitize())
	}, nil
}

// Owner returns the role that owns the test databases and that URL, the
// pools and Tx log in as: a role that is not superuser, unless
// CARDBOX_TEST_SUPERUSER_OWNER=1.
func Owner() string {
	cfg, err := pgconn.ParseConfig(ownerURL)
	if err != nil {
		return ""
	}
	return cfg.User
}

// SuperuserOwner reports whether the test databases are owned (and used)
// by the test server's superuser (CARDBOX_TEST_SUPERUSER_OWNER=1).
func SuperuserOwner() bool { return superuserOwner }

// startEmbedded runs a throwaway cluster tuned for tests: durability off,
// since these tests never crash Postgres itself.
func startEmbedded(ctx context.Context) (*pgembed.Server, string, error) {
	dir, err := os.MkdirTemp("", "cardbox-pgtest-")
	if err != nil {
		return nil, "", err
	}
	// The cluster may run as another user (when tests run as root).
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, "", err
	}
	srv, err := pgembed.Start(ctx, pgembed.Options{Dir: dir, Settings: map[string]string{
		"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
		"max_connections": "300", "shared_buffers": "128MB",
	}})
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	return srv, dir, nil
}

func createTemplate(ctx context.Context) error {
	if err := admin(ctx, "CREATE DATABASE "+pgx.Identifier{template}.Sanitize()+ownedBy()); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, URL(template))
	if err != nil {
		return err
	}
	defer pool.Close()
	return migrations.Up(ctx, pool)
}

// ownedBy is the OWNER clause of CREATE DATABASE.
func ownedBy() string {
	if owner == "" {
		return ""
	}
	return " OWNER " + pgx.Identifier{owner}.Sanitize()
}

// URL returns a connection string for database db on the test server, as
// the databases' owner (see Owner).
func URL(db string) string { return withDB(ownerURL, db) }

// SuperuserURL returns a connection string for database db as the test
// server's superuser (the role of CARDBOX_TEST_DATABASE_URL), for a test
// that needs more than the owner may do.
func SuperuserURL(db string) string { return withDB(baseURL, db) }

// DBName returns the database name of a URL from NewDB.
func DBName(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		panic(fmt.Sprintf("pgtest: bad URL: %v", err))
	}
	return strings.TrimPrefix(u.Path, "/")
}

func withDB(base, db string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(fmt.Sprintf("pgtest: bad %s: %v", EnvURL, err))
	}
	u.Path = "/" + db
	return u.String()
}

func admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		return fmt.Errorf("pgtest: connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgtest: %s: %w", sql, err)
	}
	return nil
}

func dropDB(ctx context.Context, name string) error {
	return admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

// NewDB creates a fresh, migrated database for t and returns its URL. It is
// dropped when the test ends.
func NewDB(t testing.TB) string {
	t.Helper()
	if template == "" {
		t.Fatal("pgtest: call pgtest.Main from TestMain")
	}
	ctx := context.Background()
	name := fmt.Sprintf("%s_%s_%d", template, sanitize(t.Name()), seq.Add(1))
	if len(name) > 63 {
		name = fmt.Sprintf("%s_t%d", template, seq.Add(1))
	}
	if err := admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize()+ownedBy()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dropDB(context.Background(), name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return URL(name)
}

// NewPool is NewDB plus a pool on it, closed when the test ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := NewPoolAndURL(t)
	return pool
}

// NewPoolAndURL is NewPool that also returns the database's URL, for a
// test that hands it to a command or a server as well.
func NewPoolAndURL(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	url := NewDB(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, url
}

// SuperuserPool returns a pool on database (a NewDB database's name:
// DBName of its URL, or its pool's Config().ConnConfig.Database) as the
// test server's superuser, closed when the test ends: for what the owner
// may not do, such as taking a role it is no member of (cardbox_analyst)
// or ending other roles' sessions.
func SuperuserPool(t testing.TB, database string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), SuperuserURL(database))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Tx begins a transaction on a database shared by the binary's tests and
// rolls it back when the test ends, so nothing a test writes is seen by
// another.
func Tx(t testing.TB) pgx.Tx {
	t.Helper()
	sharedOnce.Do(func() {
		var url string
		url, sharedErr = sharedDB()
		if sharedErr == nil {
			sharedPool, sharedErr = pgxpool.New(context.Background(), url)
		}
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	tx, err := sharedPool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// sharedDB creates the binary's shared database, dropped after the tests.
func sharedDB() (string, error) {
	name := template + "_shared"
	ctx := context.Background()
	if err := admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize()+ownedBy()); err != nil {
		return "", err
	}
	sharedCleanup = func(ctx context.Context) { _ = dropDB(ctx, name) }
	return URL(name), nil
}

// sharedCleanup drops the shared database once it exists.
var sharedCleanup = func(context.Context) {}

func sanitize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() > 20 {
		return b.String()[:20]
	}
	return b.String()
}
