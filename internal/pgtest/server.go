package pgtest

import (
	"context"
	"crypto/rand"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/internal/pgembed"
)

// Server is a PostgreSQL server of a test's own, beside the one Main
// prepares: another cluster, with roles and databases of its own, for a
// test that needs a second server (a backup restored onto another
// server than its own plays it as the external, managed one). It is
// started as Main starts its server and knows none of cardbox's roles.
type Server struct {
	srv      *pgembed.Server
	password string // of every role NewOwnedDB makes
}

// NewServer starts a new cluster for t, stopped and removed when t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	srv, dir, err := startEmbedded(context.Background())
	if err != nil {
		t.Fatalf("pgtest: start a second server: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(context.Background()); err != nil {
			t.Errorf("pgtest: stop the second server: %v", err)
		}
		os.RemoveAll(dir)
	})
	return &Server{srv: srv, password: rand.Text()}
}

// SuperuserURL returns a connection string for database db on s as its
// superuser.
func (s *Server) SuperuserURL(db string) string { return s.srv.URL(db) }

// NewOwnedDB makes, as a database administrator of a managed service
// does for cardbox (docs/operations.md, "The role and the database"), a
// login role named role with OwnerAttributes and a password unless it
// exists (it may own several), and an empty database named db owned by it, and returns the
// URL of db as role.
func (s *Server) NewOwnedDB(t testing.TB, role, db string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.SuperuserURL("postgres"))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", role).Scan(&exists); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" "+OwnerAttributes+" PASSWORD '"+s.password+"'"); err != nil {
			t.Fatalf("pgtest: make role %s: %v", role, err)
		}
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()+" OWNER "+pgx.Identifier{role}.Sanitize()); err != nil {
		t.Fatalf("pgtest: make database %s: %v", db, err)
	}
	u, err := url.Parse(withDB(s.SuperuserURL("postgres"), db))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u.User = url.UserPassword(role, s.password)
	q := u.Query() // pgembed's URL names its superuser in the query
	q.Del("user")
	q.Del("password")
	u.RawQuery = q.Encode()
	return u.String()
}
