package database

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cardboxhq/cardbox/cmd/internal/config"
	"github.com/cardboxhq/cardbox/internal/pgrole"
)

// The embedded cluster's pool logs in as a role that is not superuser,
// does not bypass row-level security, owns no table and may do nothing
// without taking a path's role.
func TestPoolIsNotTheOwner(t *testing.T) {
	// Not t.TempDir: postgres may run as another user (tests run as root).
	dir, err := os.MkdirTemp("", "cardbox-database-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := Open(ctx, &config.Config{DataDir: dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })

	var user string
	var super, bypass bool
	var owned int
	err = d.Pool.QueryRow(ctx, `
		SELECT session_user, r.rolsuper, r.rolbypassrls,
		       (SELECT count(*) FROM pg_tables WHERE tableowner = session_user)
		FROM pg_roles r WHERE r.rolname = session_user`).Scan(&user, &super, &bypass, &owned)
	if err != nil {
		t.Fatal(err)
	}
	if user != pgrole.Server || super || bypass || owned != 0 {
		t.Fatalf("pool logs in as %q (superuser %v, bypassrls %v, owns %d tables), want %s, none of them",
			user, super, bypass, owned, pgrole.Server)
	}
	for _, sql := range []string{"SELECT 1 FROM turns", "SELECT 1 FROM cards", "SELECT 1 FROM api_keys", "INSERT INTO tenants (tenant_id) VALUES ('x')"} {
		_, err := d.Pool.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s without a path role: err = %v, want permission denied", sql, err)
		}
	}
	var n int
	if err := pgrole.As(d.Pool, pgrole.Tenant, "default").QueryRow(ctx, "SELECT count(*) FROM tenants").Scan(&n); err != nil || n != 1 {
		t.Errorf("tenants seen as tenant default: %d, %v; want its own row", n, err)
	}
}
