// Package migrations holds cardbox's SQL schema as goose migrations embedded
// in the binary, and applies them.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// FS holds the migration files; sqlc reads the same files as its schema.
//
//go:embed *.sql
var FS embed.FS

// Up applies every pending migration to the database behind pool. goose
// takes a Postgres advisory lock, so concurrent starts apply each migration
// once. A role that may not create roles must find cardbox's made already
// (see CheckRoles).
func Up(ctx context.Context, pool *pgxpool.Pool) error {
	if err := CheckRoles(ctx, pool); err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// Status reports each migration's version and whether it is applied.
func Status(ctx context.Context, pool *pgxpool.Pool) ([]*goose.MigrationStatus, error) {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := provider(db)
	if err != nil {
		return nil, err
	}
	return p.Status(ctx)
}

func provider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS, goose.WithSessionLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return p, nil
}

// PathRoles are the roles of the server's paths (internal/pgrole), which
// the migrations make and grant to ServerRole.
var PathRoles = []string{"cardbox_tenant", "cardbox_committer", "cardbox_recovery", "cardbox_sweeper",
	"cardbox_lookup", "cardbox_admin", "cardbox_projector"}

// ServerRole is the role the server's connections take (internal/pgrole's
// Server), a member of every path role; AnalystRole is the group role of
// analysts' SQL roles.
const (
	ServerRole  = "cardbox_server"
	AnalystRole = "cardbox_analyst"
)

// RoleStatements are what a database administrator runs once, as a
// superuser, for an owner role that may not create roles (no CREATEROLE):
// the roles the migrations would otherwise make, and the memberships they
// would grant (docs/operations.md).
func RoleStatements(owner string) []string {
	var out []string
	for _, r := range append(append([]string{}, PathRoles...), ServerRole, AnalystRole) {
		out = append(out, "CREATE ROLE "+ident(r)+" NOLOGIN NOINHERIT;")
	}
	out = append(out, "GRANT "+strings.Join(PathRoles, ", ")+" TO "+ServerRole+";")
	out = append(out, "GRANT "+ServerRole+" TO "+ident(owner)+";")
	return out
}

// CheckRoles checks, before migrating, that the role pool logs in as may
// make what the migrations make of cardbox's roles: with CREATEROLE (or
// as a superuser) it makes them; without, each must exist already, with
// its memberships (or the admin option on them), and the error names the
// statements of RoleStatements still to run.
func CheckRoles(ctx context.Context, pool *pgxpool.Pool) error {
	var owner string
	var super, createRole bool
	err := pool.QueryRow(ctx, `SELECT rolname, rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user`).
		Scan(&owner, &super, &createRole)
	if err != nil {
		return fmt.Errorf("migrate: read the migrating role: %w", err)
	}
	if super || createRole {
		return nil
	}
	type grant struct{ role, member string }
	grants := []grant{{ServerRole, owner}}
	for _, r := range PathRoles {
		grants = append(grants, grant{r, ServerRole})
	}
	var missing []string
	for _, r := range append(append([]string{}, PathRoles...), ServerRole, AnalystRole) {
		var exists bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)`, r).Scan(&exists); err != nil {
			return fmt.Errorf("migrate: check role %s: %w", r, err)
		}
		if !exists {
			missing = append(missing, "CREATE ROLE "+ident(r)+" NOLOGIN NOINHERIT;")
		}
	}
	for _, g := range grants {
		var ok bool
		err := pool.QueryRow(ctx, `
			SELECT EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid JOIN pg_roles u ON u.oid = m.member
			               WHERE r.rolname = $1 AND u.rolname = $2)
			    OR EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid
			               WHERE r.rolname = $1 AND m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user) AND m.admin_option)`,
			g.role, g.member).Scan(&ok)
		if err != nil {
			return fmt.Errorf("migrate: check the membership of %s in %s: %w", g.member, g.role, err)
		}
		if !ok {
			missing = append(missing, "GRANT "+ident(g.role)+" TO "+ident(g.member)+";")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("migrate: role %s may not create roles (no CREATEROLE) and cardbox's roles are not all made: "+
			"a superuser must run once: %s (docs/operations.md, \"Roles made by a database administrator\")",
			owner, strings.Join(missing, " "))
	}
	return nil
}

// EnsureRoles makes what the migrations make of cardbox's roles where
// it is missing, for a database whose tables, grants and policies come
// from elsewhere (a restored backup) and name those roles: each role,
// the path roles' membership in ServerRole, and ServerRole's in the role
// pool logs in as. A role that may not create roles must find them made;
// CheckRoles' error then names the statements a superuser runs.
func EnsureRoles(ctx context.Context, pool *pgxpool.Pool) error {
	if err := CheckRoles(ctx, pool); err != nil {
		return err
	}
	var owner string
	if err := pool.QueryRow(ctx, `SELECT current_user`).Scan(&owner); err != nil {
		return fmt.Errorf("make cardbox's roles: %w", err)
	}
	// The attributes the migrations give them (00011, 00012, 00015).
	made := []struct{ role, attrs string }{{AnalystRole, "NOLOGIN"}}
	for _, r := range append(append([]string{}, PathRoles...), ServerRole) {
		made = append(made, struct{ role, attrs string }{r, "NOLOGIN NOINHERIT NOSUPERUSER NOBYPASSRLS"})
	}
	for _, m := range made {
		var exists bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)`, m.role).Scan(&exists); err != nil {
			return fmt.Errorf("make role %s: %w", m.role, err)
		}
		if exists {
			continue
		}
		_, err := pool.Exec(ctx, "CREATE ROLE "+pgx.Identifier{m.role}.Sanitize()+" "+m.attrs)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" {
			// duplicate_object: roles belong to the cluster, and another
			// database's migrations made it meanwhile, which is as good.
			continue
		}
		if err != nil {
			return fmt.Errorf("make role %s: %w", m.role, err)
		}
	}
	grants := []struct{ role, member string }{{ServerRole, owner}}
	for _, r := range PathRoles {
		grants = append(grants, struct{ role, member string }{r, ServerRole})
	}
	for _, g := range grants {
		var member bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid
			JOIN pg_roles u ON u.oid = m.member WHERE r.rolname = $1 AND u.rolname = $2)`, g.role, g.member).Scan(&member)
		if err != nil {
			return fmt.Errorf("grant role %s to %s: %w", g.role, g.member, err)
		}
		if member {
			continue
		}
		if _, err := pool.Exec(ctx, "GRANT "+pgx.Identifier{g.role}.Sanitize()+" TO "+pgx.Identifier{g.member}.Sanitize()); err != nil {
			return fmt.Errorf("grant role %s to %s: %w", g.role, g.member, err)
		}
	}
	return nil
}

var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// ident quotes a role name for SQL when it needs it (as quote_ident
// does, but for keywords), for statements an administrator reads.
func ident(name string) string {
	if plainIdent.MatchString(name) {
		return name
	}
	return pgx.Identifier{name}.Sanitize()
}
