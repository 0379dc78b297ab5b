// Package pgtest gives tests real, isolated PostgreSQL databases.
//
// A test binary calls Main from TestMain. When CARDBOX_TEST_DATABASE_URL is
// unset, Main starts a private embedded cluster (package pgembed) in a
// temporary directory for the whole binary and stops it afterwards; when it
// is set, databases are created on that server (the role needs CREATEDB).
//
// Like River's riverdbtest, the cheap default is a transaction that is
// rolled back when the test ends (Tx); a test that commits, or runs a
// server, takes a fresh database of its own (NewDB). Both start from a
// template database migrated once per binary.
package pgtest

import (
	"context"
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
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/pgembed"
	"github.com/cardboxhq/cardbox/migrations"
)

// EnvURL names the variable that points tests at an existing server.
const EnvURL = "CARDBOX_TEST_DATABASE_URL"

var (
	baseURL  string // a URL on the test server; the database part is replaced
	template string // migrated template database
	seq      atomic.Int64

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
	if err := admin(ctx, "CREATE DATABASE "+pgx.Identifier{template}.Sanitize()); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, URL(template))
	if err != nil {
		return err
	}
	defer pool.Close()
	return migrations.Up(ctx, pool)
}

// URL returns a connection string for database db on the test server.
func URL(db string) string {
	u, err := url.Parse(baseURL)
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
	if err := admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize()); err != nil {
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
	if err := admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize()); err != nil {
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
