package tenancy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cardboxhq/cardbox/internal/auth"
	"github.com/cardboxhq/cardbox/internal/pgembed"
	"github.com/cardboxhq/cardbox/migrations"
)

func TestSQLRoleName(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct{ tenant, want string }{
		{"acme", "cardbox_sql_acme"},
		{"a_b", "cardbox_sql_a_b"},
		{"a.b", "cardbox_sql_a_b_" + hash8("a.b")},
		{"a-b", "cardbox_sql_a_b_" + hash8("a-b")},
		{"Acme", "cardbox_sql_acme_" + hash8("Acme")},
		{long, "cardbox_sql_" + long[:42] + "_" + hash8(long)},
	} {
		got := SQLRoleName(tc.tenant)
		if got != tc.want || len(got) > 63 || !sqlRoleName.MatchString(got) {
			t.Errorf("SQLRoleName(%q) = %q (%d bytes), want %q", tc.tenant, got, len(got), tc.want)
		}
	}
}

func hash8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// analystDB is a migrated database on an embedded cluster of its own that
// also listens on a loopback TCP port, as cardboxd --sql-addr runs it.
type analystDB struct {
	keys  *Admin
	owner *pgxpool.Pool // the superuser, on the socket
	addr  string        // the TCP listener
	name  string        // the database
	log   string        // postgres.log
}

func newAnalystDB(t *testing.T) *analystDB {
	t.Helper()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "cardbox-sqlrole-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // postgres may run as another user
		t.Fatal(err)
	}
	srv, err := pgembed.Start(ctx, pgembed.Options{Dir: filepath.Join(dir, "pg"), TCPAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		Settings: map[string]string{"fsync": "off", "shared_buffers": "32MB"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(context.Background()) })
	const name = "cardbox"
	if err := srv.EnsureDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, srv.URL(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := migrations.Up(ctx, pool); err != nil {
		t.Fatal(err)
	}
	return &analystDB{keys: New(pool, nil), owner: pool, addr: srv.TCPAddr(), name: name,
		log: filepath.Join(dir, "pg", "postgres.log")}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// tcpURL is the URL an analyst connects with: user and password over the
// loopback listener.
func (a *analystDB) tcpURL(user, password string) string {
	u := url.URL{Scheme: "postgres", Host: a.addr, Path: "/" + a.name, RawQuery: "sslmode=disable"}
	u.User = url.UserPassword(user, password)
	if password == "" {
		u.User = url.User(user)
	}
	return u.String()
}

// connect logs in over TCP; the connection closes when the test ends.
func (a *analystDB) connect(t *testing.T, user, password string) (*pgx.Conn, error) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), a.tcpURL(user, password))
	if err == nil {
		t.Cleanup(func() { conn.Close(context.Background()) })
	}
	return conn, err
}

func (a *analystDB) mustConnect(t *testing.T, user, password string) *pgx.Conn {
	t.Helper()
	conn, err := a.connect(t, user, password)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	return conn
}

// seed gives tenant n rows in each table an analyst reads, ids from base.
func (a *analystDB) seed(t *testing.T, tenant string, n, base int) {
	t.Helper()
	for id := base; id < base+n; id++ {
		for _, stmt := range []string{
			`INSERT INTO contexts (tenant_id, context_id) VALUES ($1, $2)`,
			`INSERT INTO turns (tenant_id, turn_id, context_id, parent_turn_id, depth, type_id, type_version,
			    encoding, compression, uncompressed_len, payload_hash, created_at)
			 VALUES ($1, $2, $2, 0, 1, 'test.Turn', 1, 1, 0, 0, '\x00', now())`,
			`INSERT INTO turn_metadata (tenant_id, turn_id, title) VALUES ($1, $2, 'title')`,
			`INSERT INTO cards (tenant_id, card_id) VALUES ($1, $2::bigint::text)`,
			`INSERT INTO boxes (tenant_id, box_id) VALUES ($1, $2::bigint::text)`,
		} {
			if _, err := a.owner.Exec(context.Background(), stmt, tenant, id); err != nil {
				t.Fatalf("seed %s: %v", tenant, err)
			}
		}
	}
}

// analystTables are the tables a SQL role reads.
var analystTables = []string{"turns", "turn_metadata", "contexts", "cards", "boxes"}

// visible returns, per table, the rows conn sees of each tenant.
func visible(t *testing.T, conn *pgx.Conn) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	for _, table := range analystTables {
		rows, err := conn.Query(context.Background(), "SELECT tenant_id, count(*)::int FROM "+table+" GROUP BY tenant_id")
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		out[table] = map[string]int{}
		for rows.Next() {
			var tenant string
			var n int
			if err := rows.Scan(&tenant, &n); err != nil {
				t.Fatal(err)
			}
			out[table][tenant] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
	}
	return out
}

// onlyRowsOf checks that conn sees exactly n rows of tenant in each table
// and nothing else.
func onlyRowsOf(t *testing.T, conn *pgx.Conn, tenant string, n int) {
	t.Helper()
	for table, seen := range visible(t, conn) {
		if len(seen) != 1 || seen[tenant] != n {
			t.Errorf("%s: sees %v, want only %d rows of %s", table, seen, n, tenant)
		}
	}
}

func sqlState(err error) string {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code
	}
	return ""
}

// An analyst's role reads its tenant's rows in every table it may read,
// over TCP with its password, and nothing else: not another tenant's rows
// whatever it sets, not the other tables; rotation and drop lock out the
// old password and end open sessions; no password reaches the audit log
// or Postgres's log.
func TestSQLRoleSeesOnlyItsTenant(t *testing.T) {
	ctx := context.Background()
	a := newAnalystDB(t)
	mustTenant(t, a.keys, "acme")
	mustTenant(t, a.keys, "beta")
	a.seed(t, "acme", 2, 1)
	a.seed(t, "beta", 3, 100)

	role, password, err := a.keys.CreateSQLRole(ctx, "test", "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	if role.Name != "cardbox_sql_acme" || role.TenantID != "acme" || len(password) != 43 || role.RotatedAt != nil {
		t.Fatalf("CreateSQLRole = %+v, password of %d characters", role, len(password))
	}
	passwords := []string{password}
	analyst := a.mustConnect(t, role.Name, password)

	t.Run("reads its tenant's rows only", func(t *testing.T) { onlyRowsOf(t, analyst, "acme", 2) })

	t.Run("settings change nothing", func(t *testing.T) {
		for _, stmt := range []string{
			"SET cardbox.tenant = 'beta'",
			"SELECT set_config('cardbox.tenant', 'beta', false)",
			"SET ROLE cardbox_analyst",
		} {
			if _, err := analyst.Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
			onlyRowsOf(t, analyst, "acme", 2)
		}
		// Without row security a query that policies apply to fails.
		if _, err := analyst.Exec(ctx, "SET row_security = off"); err != nil {
			t.Fatal(err)
		}
		if _, err := analyst.Exec(ctx, "SELECT count(*) FROM cards"); sqlState(err) != "42501" {
			t.Errorf("with row_security off: err = %v, want 42501", err)
		}
		if _, err := analyst.Exec(ctx, "RESET ROLE; RESET row_security; RESET cardbox.tenant"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("beside a policy that trusts a setting", func(t *testing.T) {
		// What a server's own policy could look like (migration 00011):
		// permissive, for every role, keyed on a setting. Analysts' own
		// restrictive policy still holds them to their tenant.
		for _, table := range analystTables {
			mustExec(t, a.owner, "CREATE POLICY by_setting ON "+table+" FOR SELECT TO PUBLIC USING (tenant_id = current_setting('cardbox.tenant', true))")
			t.Cleanup(func() { mustExec(t, a.owner, "DROP POLICY by_setting ON "+table) })
		}
		if _, err := analyst.Exec(ctx, "SET cardbox.tenant = 'beta'"); err != nil {
			t.Fatal(err)
		}
		onlyRowsOf(t, analyst, "acme", 2)
	})

	t.Run("other tables and writes are refused", func(t *testing.T) {
		for _, stmt := range []string{
			"SELECT count(*) FROM api_keys", "SELECT count(*) FROM audit_log", "SELECT count(*) FROM tenant_blobs",
			"SELECT count(*) FROM sql_roles", "SELECT count(*) FROM turn_log_commits",
			"INSERT INTO cards (tenant_id, card_id) VALUES ('acme', 'new')", "UPDATE boxes SET metadata = '{}'",
			"DELETE FROM turns", "SELECT * FROM cards FOR UPDATE", "CREATE TABLE mine (x int)",
		} {
			if _, err := analyst.Exec(ctx, stmt); sqlState(err) != "42501" {
				t.Errorf("%s: err = %v, want permission denied (42501)", stmt, err)
			}
		}
	})

	t.Run("its own tenant's row and keys only", func(t *testing.T) {
		// The analytics views read tenants and idempotency_keys (00016).
		for _, q := range []string{
			"SELECT count(*)::int FROM tenants WHERE tenant_id <> 'acme'",
			"SELECT count(*)::int FROM idempotency_keys WHERE tenant_id <> 'acme'",
		} {
			var n int
			if err := analyst.QueryRow(ctx, q).Scan(&n); err != nil || n != 0 {
				t.Errorf("%s = %d, %v; want 0", q, n, err)
			}
		}
		var own int
		if err := analyst.QueryRow(ctx, "SELECT count(*)::int FROM tenants").Scan(&own); err != nil || own != 1 {
			t.Errorf("tenants seen: %d, %v; want its own row", own, err)
		}
	})

	t.Run("no column statistics", func(t *testing.T) {
		mustExec(t, a.owner, "ANALYZE")
		var n int
		if err := analyst.QueryRow(ctx, "SELECT count(*)::int FROM pg_stats WHERE tablename = ANY($1)", analystTables).Scan(&n); err != nil || n != 0 {
			t.Errorf("pg_stats shows %d rows of the analysts' tables (%v)", n, err)
		}
		var owner int
		if err := a.owner.QueryRow(ctx, "SELECT count(*)::int FROM pg_stats WHERE tablename = ANY($1)", analystTables).Scan(&owner); err != nil || owner == 0 {
			t.Errorf("the owner sees %d rows of pg_stats (%v): the check above proves nothing", owner, err)
		}
	})

	t.Run("the role holds an analyst's rights only", func(t *testing.T) {
		var limit int
		var super, bypass, createRole, createDB, inherit bool
		err := a.owner.QueryRow(ctx, `SELECT rolconnlimit, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, rolinherit
			FROM pg_roles WHERE rolname = $1`, role.Name).Scan(&limit, &super, &bypass, &createRole, &createDB, &inherit)
		if err != nil || limit != SQLRoleConnLimit || super || bypass || createRole || createDB || !inherit {
			t.Errorf("role: limit %d super %v bypassrls %v createrole %v createdb %v inherit %v, err %v",
				limit, super, bypass, createRole, createDB, inherit, err)
		}
	})

	t.Run("logins that fail", func(t *testing.T) {
		for _, tc := range []struct{ name, user, password string }{
			{"wrong password", role.Name, password[:42] + "x"},
			{"no password", role.Name, ""},
			{"superuser without password", pgembed.Superuser, ""},
			{"superuser with a guess", pgembed.Superuser, "cardbox"},
			{"group role", "cardbox_analyst", password},
		} {
			if _, err := a.connect(t, tc.user, tc.password); sqlState(err) != "28P01" {
				t.Errorf("%s: err = %v, want a failed password (28P01)", tc.name, err)
			}
		}
	})

	t.Run("rotation", func(t *testing.T) {
		rotated, newPassword, err := a.keys.CreateSQLRole(ctx, "test", "acme", "")
		if err != nil || rotated.Name != role.Name || rotated.RotatedAt == nil || newPassword == password || rotated.Unended != 0 {
			t.Fatalf("rotate: %+v, same password %v, %v", rotated, newPassword == password, err)
		}
		passwords = append(passwords, newPassword)
		if _, err := analyst.Exec(ctx, "SELECT 1"); err == nil {
			t.Error("a session of the old password is still open")
		}
		if _, err := a.connect(t, role.Name, password); sqlState(err) != "28P01" {
			t.Errorf("the old password: err = %v, want 28P01", err)
		}
		onlyRowsOf(t, a.mustConnect(t, role.Name, newPassword), "acme", 2)
		password = newPassword
	})

	t.Run("names that are refused", func(t *testing.T) {
		for _, tc := range []struct {
			tenant, role string
			want         error
		}{
			{"beta", role.Name, ErrSQLRoleTaken}, // acme's
			{"beta", pgembed.Superuser, ErrSQLRoleTaken},
			{"beta", "cardbox_analyst", ErrSQLRoleTaken},
			{"beta", "pg_monitor", ErrBadSQLRoleName},
			{"beta", "Analyst", ErrBadSQLRoleName},
			{"beta", "a;drop", ErrBadSQLRoleName},
			{"nobody", "", auth.ErrNoTenant},
		} {
			if _, _, err := a.keys.CreateSQLRole(ctx, "test", tc.tenant, tc.role); !errors.Is(err, tc.want) {
				t.Errorf("CreateSQLRole(%q, %q): err = %v, want %v", tc.tenant, tc.role, err, tc.want)
			}
		}
	})

	t.Run("unsafe states are refused", func(t *testing.T) {
		for _, tc := range []struct{ name, unsafe, repair, want string }{
			// PostgreSQL 14's default: analysts could plant functions.
			{"PUBLIC may create in the schema", "GRANT CREATE ON SCHEMA public TO PUBLIC", "REVOKE CREATE ON SCHEMA public FROM PUBLIC", ErrSQLRolesUnavailable.Error()},
			{"the role belongs to another role", "GRANT pg_read_all_data TO " + role.Name, "REVOKE pg_read_all_data FROM " + role.Name, "rights beyond an analyst's"},
		} {
			mustExec(t, a.owner, tc.unsafe)
			_, _, err := a.keys.CreateSQLRole(ctx, "test", "acme", "")
			mustExec(t, a.owner, tc.repair)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
			}
		}
		onlyRowsOf(t, a.mustConnect(t, role.Name, password), "acme", 2) // nothing changed
	})

	t.Run("tenant create with a SQL role", func(t *testing.T) {
		tenant, r, pw, err := a.keys.CreateTenantWithSQLRole(ctx, "test", "Gamma.co", "Gamma")
		if err != nil || tenant.ID != "Gamma.co" || r.Name != SQLRoleName("Gamma.co") || r.TenantID != "Gamma.co" {
			t.Fatalf("CreateTenantWithSQLRole = %+v, %+v, %v", tenant, r, err)
		}
		passwords = append(passwords, pw)
		a.seed(t, "Gamma.co", 1, 1000)
		onlyRowsOf(t, a.mustConnect(t, r.Name, pw), "Gamma.co", 1)
		if _, _, _, err := a.keys.CreateTenantWithSQLRole(ctx, "test", "Gamma.co", ""); !errors.Is(err, ErrTenantExists) {
			t.Errorf("again: err = %v, want ErrTenantExists", err)
		}
	})

	t.Run("list", func(t *testing.T) {
		roles, err := a.keys.ListSQLRoles(ctx, "acme")
		if err != nil || len(roles) != 1 || roles[0].Name != role.Name || roles[0].RotatedAt == nil || roles[0].Missing {
			t.Fatalf("ListSQLRoles(acme) = %+v, %v", roles, err)
		}
		if all, err := a.keys.ListSQLRoles(ctx, ""); err != nil || len(all) != 2 {
			t.Fatalf("ListSQLRoles() = %+v, %v", all, err)
		}
	})

	t.Run("drop", func(t *testing.T) {
		open := a.mustConnect(t, role.Name, password)
		dropped, err := a.keys.DropSQLRoles(ctx, "test", "acme", "")
		if err != nil || len(dropped) != 1 || dropped[0].Name != role.Name || dropped[0].Unended != 0 {
			t.Fatalf("DropSQLRoles = %+v, %v", dropped, err)
		}
		if _, err := open.Exec(ctx, "SELECT 1"); err == nil {
			t.Error("a session of the dropped role is still open")
		}
		if _, err := a.connect(t, role.Name, password); sqlState(err) != "28P01" {
			t.Errorf("the dropped role: err = %v, want 28P01", err)
		}
		if _, err := a.keys.DropSQLRoles(ctx, "test", "acme", ""); !errors.Is(err, ErrNoSQLRole) {
			t.Errorf("drop again: err = %v, want ErrNoSQLRole", err)
		}
	})

	t.Run("audited, never a password", func(t *testing.T) {
		var actions []string
		entries, err := a.keys.Audit(ctx, "acme", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			actions = append(actions, e.Action)
		}
		if got := strings.Join(actions, ","); got != "sqlrole.drop,sqlrole.rotate,sqlrole.create,tenant.create" {
			t.Errorf("audit of acme: %s", got)
		}
		logText, err := os.ReadFile(a.log)
		if err != nil {
			t.Fatal(err)
		}
		for _, pw := range passwords {
			var n int
			if err := a.owner.QueryRow(ctx, "SELECT count(*) FROM audit_log WHERE strpos(audit_log::text, $1) > 0", pw).Scan(&n); err != nil || n != 0 {
				t.Errorf("a password is in the audit log (%d rows, %v)", n, err)
			}
			if strings.Contains(string(logText), pw) {
				t.Error("a password is in postgres.log")
			}
		}
	})
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
